package platform_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
)

// hmacHex returns the hex HMAC-SHA256 of msg keyed with key.
func hmacHex(key, msg []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write(msg)
	return hex.EncodeToString(mac.Sum(nil))
}

// replayUnderNewIDs serves p with dedupehttp.New, posts one captured
// delivery (signed with secret by sign) and then the same request 20 times
// under new ids in the id header X-Delivery, and returns how many times the
// handler ran.
func replayUnderNewIDs(t *testing.T, p platform.Preset, secret string, sign func(id string, body []byte) string) int {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	ran := 0
	h := dedupehttp.New(dedupe.New(nil, dedupe.WithLogger(quiet)), p.WithSecret(secret),
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran++ }),
		dedupehttp.WithClock(func() time.Time { return now }), dedupehttp.WithLogger(quiet))
	body := []byte(`{"action":"transfer","amount":100}`)
	captured := http.Header{"X-Delivery": {"d-0"}, "X-Signature": {sign("d-0", body)}}
	require.Equal(t, http.StatusOK, post(h, body, captured).Code)
	for i := 1; i <= 20; i++ {
		replay := captured.Clone()
		replay.Set("X-Delivery", fmt.Sprint("d-", i)) // the attacker's new id; the signature stays
		post(h, body, replay)
	}
	return ran
}

// TestRuleRefusesUnsignedID builds a Rule keyed by a header its signature
// does not cover: NewPreset refuses it, since one captured delivery could run
// again under any new id. Before, it was built, and a captured delivery
// posted again under 20 new ids ran the handler 21 times. Signing {id} makes
// each of the 20 a forgery (401; the handler runs once); UnsignedID accepts
// the risk, for a sender that signs no id, and says so.
func TestRuleRefusesUnsignedID(t *testing.T) {
	const secret = "the-secret-of-the-sender"
	unsigned := platform.Rule{Name: "pay", ID: "header:X-Delivery",
		Signature: platform.SignatureRule{Header: "X-Signature", Encoding: "hex"}}
	bodyOnly := func(_ string, body []byte) string { return hmacHex([]byte(secret), body) }

	p, err := platform.NewPreset(unsigned)
	if err == nil {
		t.Errorf("a rule whose id header is unsigned was built: one captured delivery ran %d times under 21 ids",
			replayUnderNewIDs(t, p, secret, bodyOnly))
	}
	require.ErrorIs(t, err, platform.ErrInvalidRule)
	assert.ErrorContains(t, err, "does not sign {id}")
	assert.ErrorContains(t, err, "unsigned_id")

	signed := unsigned
	signed.Signature.Signed = "{id}.{body}"
	p, err = platform.NewPreset(signed)
	require.NoError(t, err)
	ran := replayUnderNewIDs(t, p, secret, func(id string, body []byte) string {
		return hmacHex([]byte(secret), append([]byte(id+"."), body...))
	})
	assert.Equal(t, 1, ran, "with {id} signed, the 20 new ids are forgeries")

	optIn := unsigned
	optIn.UnsignedID = true
	p, err = platform.NewPreset(optIn)
	require.NoError(t, err, "UnsignedID accepts the risk")
	assert.Equal(t, 21, replayUnderNewIDs(t, p, secret, bodyOnly), "the risk UnsignedID accepts")
}

// TestRuleRefusesShortSecret gives a Rule's preset HMAC keys of 1 to 16
// bytes, as text, base64 and hex: below MinSecretSize (16) the preset
// refuses every delivery and CheckSecret says why. Before, a 1-byte secret
// was taken, and a forger found it by trying the 256 keys: it forged a
// delivery in at most 256 tries (108 for the key "k"); now none of the 256
// is accepted.
func TestRuleRefusesShortSecret(t *testing.T) {
	for _, enc := range []string{"text", "base64", "hex"} {
		r := hookRule()
		r.Signature.SecretEncoding = enc
		base, err := platform.NewPreset(r)
		require.NoError(t, err)
		for n := 1; n <= platform.MinSecretSize; n++ {
			key := strings.Repeat("Q", n)
			secret := map[string]string{"text": key, "base64": base64.StdEncoding.EncodeToString([]byte(key)),
				"hex": hex.EncodeToString([]byte(key))}[enc]
			err := base.WithSecret(secret).CheckSecret()
			if n < platform.MinSecretSize {
				if assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s key of %d bytes", enc, n) {
					assert.ErrorContains(t, err, fmt.Sprintf("secret is %d bytes, fewer than the 16", n))
					assert.NotContains(t, err.Error(), secret, "the error never holds the secret")
				}
			} else {
				assert.NoError(t, err, "%s key of %d bytes", enc, n)
			}
		}
	}

	p := platform.GitHub.WithSecret("k")
	body := []byte(`{"action":"deleted","forged":true}`)
	tries, forged := 0, false
	for b := range 256 {
		tries++
		h := http.Header{"X-Hub-Signature-256": {"sha256=" + hmacHex([]byte{byte(b)}, body)}, "X-Github-Delivery": {"d"}}
		if _, err := p.Verify(body, h, now); err == nil {
			forged = true
			break
		}
	}
	assert.False(t, forged, "a delivery forged by trying every 1-byte key, after %d tries", tries)
}
