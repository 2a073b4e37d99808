package platform_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// The vectors of the official libraries' tests
// (standard-webhooks/standard-webhooks, libraries/go/webhook_test.go,
// TestWebhookSign, and libraries/go/webhook_asymmetric_test.go,
// TestAsymmetricWebhookSign): one message signed at 1614265330.
const (
	swSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	swMsgID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	swTimestamp = 1614265330
	swPayload   = `{"test": 2432232314}`
	swV1        = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	// swSigningKey is the base64 of the Ed25519 seed the asymmetric test
	// signs with; its public key is derived in swPublicKey.
	swSigningKey = "VEVTVFNJR05JTkdLRVlET05PVFVTRVRISVNGT1JBTlk="
	swV1a        = "v1a,tQ9V2XOqn7jL/DQenEFpqIugdBVtiMmER5mhSkXBNwM0mkATuDe6KYYUuxqtaiHeYGb7KaaBRdM5WqyeFiL8Ag=="
	// swWrong is the invalid signature of the libraries' tests.
	swWrong = "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc="
)

// swPublicKey returns "whpk_" and the base64 of the public key of
// swSigningKey.
func swPublicKey(t testing.TB) string {
	seed, err := base64.StdEncoding.DecodeString(swSigningKey)
	require.NoError(t, err)
	pub := ed25519.NewKeyFromSeed(seed).Public().(ed25519.PublicKey)
	return "whpk_" + base64.StdEncoding.EncodeToString(pub)
}

func swHeader(id string, ts int64, sig string) http.Header {
	return http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {strconv.FormatInt(ts, 10)}, "Webhook-Signature": {sig}}
}

// TestStandardWebhooksVectors runs the official libraries' vectors and the
// cases of their TestWebhook: both schemes, with and without the secret's
// prefix, rotation, missing headers, timestamps 5 minutes away.
func TestStandardWebhooksVectors(t *testing.T) {
	at := time.Unix(swTimestamp, 0)
	body := []byte(swPayload)
	for name, secret := range map[string]string{
		"v1": swSecret, "v1 without whsec_": strings.TrimPrefix(swSecret, "whsec_"), "v1a": swPublicKey(t),
	} {
		p := platform.StandardWebhooks.WithSecret(secret)
		require.NoError(t, p.CheckSecret(), name)
		good, other := swV1, swV1a
		if name == "v1a" {
			good, other = swV1a, swV1
		}
		for sig, ok := range map[string]bool{
			good: true,
			swWrong + " v2,abc " + good + " " + swWrong: true, // "valid multi sig is valid"
			other:                              false,
			swWrong:                            false,
			"v1a,":                             false, // "partial signature is invalid"
			strings.Replace(good, ",", "=", 1): false,
		} {
			_, err := p.Verify(body, swHeader(swMsgID, swTimestamp, sig), at)
			if ok {
				assert.NoError(t, err, "%s %s", name, sig)
			} else {
				assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s %s", name, sig)
			}
		}
		h := swHeader(swMsgID, swTimestamp, good)
		k, err := p.Extract(body, h)
		require.NoError(t, err)
		assert.Equal(t, dedupe.Key{Channel: "webhooks", MessageID: swMsgID}, k)
		for what, edit := range map[string]func(h http.Header){
			"missing id":        func(h http.Header) { h.Del("webhook-id") },
			"missing timestamp": func(h http.Header) { h.Del("webhook-timestamp") },
			"missing signature": func(h http.Header) { h.Del("webhook-signature") },
			"another id":        func(h http.Header) { h.Set("webhook-id", swMsgID+"x") },
		} {
			h := swHeader(swMsgID, swTimestamp, good)
			edit(h)
			_, err := p.Verify(body, h, at)
			assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s %s", name, what)
		}
		// "old timestamp fails", "new timestamp fails": 5 minutes of tolerance.
		_, err = p.Verify(body, h, at.Add(5*time.Minute))
		assert.NoError(t, err, "%s: 5 minutes later", name)
		for _, d := range []time.Duration{5*time.Minute + time.Second, -5*time.Minute - time.Second, 365 * 24 * time.Hour} {
			_, err = p.Verify(body, h, at.Add(d))
			assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s: %s away", name, d)
		}
	}
	_, err := platform.StandardWebhooks.WithSecret(swSecret).Verify(body, swHeader(swMsgID, swTimestamp, swV1), at)
	require.NoError(t, err)
	assert.ErrorIs(t, platform.StandardWebhooks.WithSecret("whsk_"+swSigningKey).CheckSecret(), platform.ErrUnauthenticated,
		"the sender's secret key")
	assert.Contains(t, platform.StandardWebhooks.WithSecret("whsk_"+swSigningKey).CheckSecret().Error(), "whpk_")
	assert.ErrorIs(t, platform.StandardWebhooks.WithSecret("whpk_AAAA").CheckSecret(), platform.ErrUnauthenticated)
	assert.ErrorIs(t, platform.StandardWebhooks.WithSecret("whsec_not base64!").CheckSecret(), platform.ErrUnauthenticated)
}

// TestStandardWebhooksSpecExample keys the example of the specification
// (spec/standard-webhooks.md, Webhook headers: webhook-id
// msg_2KWPBgLlAfxdpx2AI54pPJ85f4W, webhook-timestamp 1674087231, a
// contact.created payload), signed by platformtest with both schemes, and
// its retry: a new timestamp and signature, the same webhook-id.
func TestStandardWebhooksSpecExample(t *testing.T) {
	const id = "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W"
	at := time.Unix(1674087231, 0)
	body := fixture(t, "webhooks_contact_created.json")
	for _, scheme := range []string{"webhooks", "webhooks-v1a"} {
		s := platformtest.NewSigner(scheme, "endpoint-secret-of-24+-bytes")
		p := s.Preset(platform.StandardWebhooks)
		require.NoError(t, p.CheckSecret(), scheme)
		var keys []dedupe.Key
		for _, d := range []time.Duration{0, 5 * time.Second, 5*time.Minute + 5*time.Second} { // the spec's schedule
			h := s.SignID(id, body, at.Add(d))
			got, err := p.Verify(body, h, at.Add(d))
			require.NoError(t, err, scheme)
			assert.Equal(t, body, got)
			k, err := p.Extract(got, h)
			require.NoError(t, err)
			keys = append(keys, k)
		}
		assert.Equal(t, keys[0], keys[1])
		assert.Equal(t, keys[0], keys[2])
		assert.Equal(t, id, keys[0].MessageID)
	}
}

// TestStandardWebhooksForgeries sends 1,000 forged deliveries of twelve
// kinds, each kind to a v1 endpoint and to a v1a one.
func TestStandardWebhooksForgeries(t *testing.T) {
	sym := platformtest.NewSigner("webhooks", "whsec-seed-of-the-endpoint")
	asym := platformtest.NewSigner("webhooks-v1a", "ed25519-seed-of-the-sender")
	var kinds []forgery
	for _, c := range []struct{ scheme, other *platformtest.Signer }{{sym, asym}, {asym, sym}} {
		kinds = append(kinds, swForgeries(t, c.scheme, c.other)...)
	}
	runForgeries(t, sym.Secret(), kinds)
}

// swForgeries returns the kinds of forgery sent to the endpoint of s; other
// signs with the other scheme.
func swForgeries(t *testing.T, s, other *platformtest.Signer) []forgery {
	p := s.Preset(platform.StandardWebhooks)
	scheme := map[bool]string{true: "v1a", false: "v1"}[strings.HasPrefix(s.Secret(), "whpk_")]
	base := fixture(t, "webhooks_contact_created.json")
	body := func(i int) []byte { return numbered(base, "contact.created", i) }
	id := func(i int) string { return "msg_" + strconv.Itoa(i) }
	signed := func(i int) http.Header { return s.SignID(id(i), body(i), now) }
	edit := func(i int, f func(h http.Header)) ([]byte, http.Header) {
		h := signed(i)
		f(h)
		return body(i), h
	}
	signer := map[string]string{"v1": "webhooks", "v1a": "webhooks-v1a"}[scheme]
	kinds := []forgery{
		{"wrong secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner(signer, strings.Repeat("w", i%40+1)).SignID(id(i), body(i), now)
		}, p},
		{"tampered body", func(i int) ([]byte, http.Header) {
			return bytes.Replace(body(i), []byte("1f81eb52"), []byte("1f81eb53"), 1), signed(i)
		}, p},
		{"another webhook-id", func(i int) ([]byte, http.Header) {
			return edit(i, func(h http.Header) { h.Set("webhook-id", id(i)+"0") })
		}, p},
		{"stale timestamp", func(i int) ([]byte, http.Header) {
			return body(i), s.SignID(id(i), body(i), now.Add(-5*time.Minute-time.Duration(i+1)*time.Second))
		}, p},
		{"future timestamp", func(i int) ([]byte, http.Header) {
			return body(i), s.SignID(id(i), body(i), now.Add(5*time.Minute+time.Duration(i+1)*time.Second))
		}, p},
		{"timestamp changed", func(i int) ([]byte, http.Header) {
			return edit(i, func(h http.Header) { h.Set("webhook-timestamp", strconv.FormatInt(now.Unix()+1, 10)) })
		}, p},
		{"missing header", func(i int) ([]byte, http.Header) {
			return edit(i, func(h http.Header) { h.Del([]string{"webhook-id", "webhook-timestamp", "webhook-signature"}[i%3]) })
		}, p},
		{"other scheme's signature", func(i int) ([]byte, http.Header) { return body(i), other.SignID(id(i), body(i), now) }, p},
		{"truncated signature", func(i int) ([]byte, http.Header) {
			return edit(i, func(h http.Header) {
				sig := h.Get("webhook-signature")
				h.Set("webhook-signature", sig[:len(sig)-4-i%20])
			})
		}, p},
		{"unknown version", func(i int) ([]byte, http.Header) {
			return edit(i, func(h http.Header) {
				_, sig, _ := strings.Cut(h.Get("webhook-signature"), ",")
				h.Set("webhook-signature", []string{"v2,", "v1b,", "V1,", "v1=", ""}[i%5]+sig)
			})
		}, p},
		{"nine signatures", func(i int) ([]byte, http.Header) {
			return edit(i, func(h http.Header) {
				h.Set("webhook-signature", strings.Repeat(scheme+",AAAA ", 8)+h.Get("webhook-signature"))
			})
		}, p},
		{"empty secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("webhooks", "").SignID(id(i), body(i), now)
		}, platform.StandardWebhooks.WithSecret("")},
	}
	for k := range kinds {
		kinds[k].kind = scheme + ": " + kinds[k].kind
	}
	return kinds
}

// FuzzStandardWebhooksVerify checks that the v1 scheme accepts a delivery
// only with a v1 entry that is the base64 HMAC-SHA256 of
// "{webhook-id}.{webhook-timestamp}.{body}", within 5 minutes.
func FuzzStandardWebhooksVerify(f *testing.F) {
	f.Add([]byte(swPayload), swMsgID, strconv.Itoa(swTimestamp), swV1)
	f.Add([]byte(swPayload), swMsgID, strconv.Itoa(swTimestamp), swWrong+" "+swV1)
	f.Add([]byte(swPayload), swMsgID, "1614265330000", swV1)
	f.Add([]byte(""), "", "", "v1,")
	at := time.Unix(swTimestamp, 0)
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(swSecret, "whsec_"))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body []byte, id, ts, sig string) {
		h := http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
		_, err := platform.StandardWebhooks.WithSecret(swSecret).Verify(body, h, at)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			return
		}
		n, perr := strconv.ParseInt(ts, 10, 64)
		require.NoError(t, perr)
		if len(ts) == 13 {
			n /= 1000
		}
		require.LessOrEqual(t, abs(at.Unix()-n), int64(300), "accepted a timestamp %s away", ts)
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id + "." + ts + "."))
		mac.Write(body)
		want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
		require.Contains(t, strings.Fields(sig), "v1,"+want, "accepted a signature that is not the body's")
	})
}

// FuzzStandardWebhooksV1aVerify checks that the v1a scheme accepts a
// delivery only with a v1a entry that is an Ed25519 signature, by the
// sender's key, of "{webhook-id}.{webhook-timestamp}.{body}".
func FuzzStandardWebhooksV1aVerify(f *testing.F) {
	f.Add([]byte(swPayload), swMsgID, strconv.Itoa(swTimestamp), swV1a)
	f.Add([]byte(swPayload), swMsgID, strconv.Itoa(swTimestamp), swV1+" "+swV1a)
	f.Add([]byte(swPayload), swMsgID, strconv.Itoa(swTimestamp), "v1a,")
	at := time.Unix(swTimestamp, 0)
	pubText := swPublicKey(f)
	pub, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(pubText, "whpk_"))
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, body []byte, id, ts, sig string) {
		h := http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {sig}}
		_, err := platform.StandardWebhooks.WithSecret(pubText).Verify(body, h, at)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			return
		}
		msg := append([]byte(id+"."+ts+"."), body...)
		ok := false
		for _, e := range strings.Fields(sig) {
			if b64, isV1a := strings.CutPrefix(e, "v1a,"); isV1a {
				if s, derr := base64.StdEncoding.DecodeString(b64); derr == nil && ed25519.Verify(pub, msg, s) {
					ok = true
				}
			}
		}
		require.True(t, ok, "accepted a signature that is not the sender's")
	})
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
