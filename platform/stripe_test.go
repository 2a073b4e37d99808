package platform_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
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

// The payload and secret of stripe-go's webhook tests (stripe/stripe-go,
// webhook/client_test.go: testPayload, with its API version written out, and
// testSecret).
const (
	stripeSecret  = "whsec_test_secret"
	stripePayload = "{\n  \"id\": \"evt_test_webhook\",\n  \"object\": \"event\",\n  \"api_version\": \"2025-09-30.clover\"\n}"
)

// stripeSig returns the hex v1 signature of body at ts with secret, as
// stripe-go's webhook.ComputeSignature does.
func stripeSig(secret string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(strconv.FormatInt(ts, 10) + "."))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// TestStripeSDKCases runs the cases of stripe-go's TestTokenNew: a valid
// header; a missing one; malformed ones; an unreadable extra v1 (ignored);
// the v0 scheme (refused); a rolled secret, with the old and the new
// secret; the tolerance.
func TestStripeSDKCases(t *testing.T) {
	body := []byte(stripePayload)
	ts := now.Unix()
	good := "t=" + strconv.FormatInt(ts, 10) + ",v1=" + stripeSig(stripeSecret, ts, body)
	rolled := stripeSig(stripeSecret+"_rolled_key", ts, body)
	p := platform.Stripe.WithSecret(stripeSecret)
	for hdr, ok := range map[string]bool{
		good:                                   true,
		good + ",v1=bad_signature":             true,
		good + ",v1=" + rolled:                 true,
		good + ",v0=" + rolled:                 true,
		"":                                     false,
		"v1,t=1":                               false,
		"t=":                                   false,
		strings.Replace(good, "v1=", "v0=", 1): false,
		"t=" + strconv.FormatInt(ts, 10) + ",v1=deadbeef": false,
		good + ",t=" + strconv.FormatInt(ts, 10):          false, // two timestamps
		strings.Replace(good, ",", ", ", 1):               true,
	} {
		_, err := p.Verify(body, http.Header{"Stripe-Signature": {hdr}}, now)
		if ok {
			assert.NoError(t, err, hdr)
		} else {
			assert.ErrorIs(t, err, platform.ErrUnauthenticated, hdr)
		}
	}
	withRolled := http.Header{"Stripe-Signature": {good + ",v1=" + rolled}}
	_, err := platform.Stripe.WithSecret(stripeSecret+"_rolled_key").Verify(body, withRolled, now)
	assert.NoError(t, err, "the new secret, while the old one is rolled")

	h := http.Header{"Stripe-Signature": {good}}
	_, err = p.Verify(body, h, now.Add(300*time.Second))
	assert.NoError(t, err, "300 s, the SDKs' DefaultTolerance")
	for _, d := range []time.Duration{301 * time.Second, -301 * time.Second, 3 * 24 * time.Hour} {
		_, err = p.Verify(body, h, now.Add(d))
		assert.ErrorIs(t, err, platform.ErrUnauthenticated, "%s away", d)
	}
	k, err := p.Extract(body, h)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Key{Channel: "stripe", MessageID: "evt_test_webhook"}, k)
}

// TestStripeEvent keys the event object of Stripe's API reference (The
// Event object, https://docs.stripe.com/api/events/object; abridged in
// testdata/stripe_event.json) and its retries: each signed anew with a later
// t, each the same key.
func TestStripeEvent(t *testing.T) {
	s := platformtest.NewSigner("stripe", "whsec_the-endpoint-secret")
	p := s.Preset(platform.Stripe)
	body := fixture(t, "stripe_event.json")
	var keys []dedupe.Key
	for _, d := range []time.Duration{0, time.Hour, 47 * time.Hour} {
		at := now.Add(d)
		got, err := p.Verify(body, s.Sign(body, at), at)
		require.NoError(t, err)
		k, err := p.Extract(got, nil)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	assert.Equal(t, "evt_1NG8Du2eZvKYlo2CUI79vXWy", keys[0].MessageID)
	assert.Equal(t, keys[0], keys[1])
	assert.Equal(t, keys[0], keys[2])
	_, err := p.Extract([]byte(`{"object":"event","data":{"object":{"id":"pi_1"}}}`), nil)
	assert.ErrorIs(t, err, dedupe.ErrNoMessageID, "the event's id, never its object's")
}

// TestStripeForgeries sends 1,000 forged deliveries of twelve kinds.
func TestStripeForgeries(t *testing.T) {
	const secret = "whsec_stripe_endpoint_secret"
	s := platformtest.NewSigner("stripe", secret)
	p := s.Preset(platform.Stripe)
	base := fixture(t, "stripe_event.json")
	body := func(i int) []byte { return numbered(base, "evt_1NG8Du2eZvKYlo2CUI79vXWy", i) }
	ts := strconv.FormatInt(now.Unix(), 10)
	sig := func(i int) string { return stripeSig(secret, now.Unix(), body(i)) }
	header := func(v string) http.Header { return http.Header{"Stripe-Signature": {v}} }
	runForgeries(t, secret, []forgery{
		{"wrong secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("stripe", "whsec_"+strings.Repeat("s", i%40+1)).Sign(body(i), now)
		}, p},
		{"tampered body", func(i int) ([]byte, http.Header) {
			return bytes.Replace(body(i), []byte(`"livemode": false`), []byte(`"livemode": true`), 1), header("t=" + ts + ",v1=" + sig(i))
		}, p},
		{"another event's signature", func(i int) ([]byte, http.Header) { return body(i), header("t=" + ts + ",v1=" + sig(i+1)) }, p},
		{"stale t", func(i int) ([]byte, http.Header) {
			return body(i), s.Sign(body(i), now.Add(-301*time.Second-time.Duration(i)*time.Second))
		}, p},
		{"future t", func(i int) ([]byte, http.Header) {
			return body(i), s.Sign(body(i), now.Add(301*time.Second+time.Duration(i)*time.Second))
		}, p},
		{"t changed", func(i int) ([]byte, http.Header) {
			return body(i), header("t=" + strconv.FormatInt(now.Unix()-1, 10) + ",v1=" + sig(i))
		}, p},
		{"no t", func(i int) ([]byte, http.Header) { return body(i), header("v1=" + sig(i)) }, p},
		{"v0 only", func(i int) ([]byte, http.Header) { return body(i), header("t=" + ts + ",v0=" + sig(i)) }, p},
		{"missing header", func(i int) ([]byte, http.Header) { return body(i), http.Header{} }, p},
		{"truncated signature", func(i int) ([]byte, http.Header) { return body(i), header("t=" + ts + ",v1=" + sig(i)[:i%64]) }, p},
		{"nine v1 entries", func(i int) ([]byte, http.Header) {
			return body(i), header("t=" + ts + strings.Repeat(",v1="+strings.Repeat("0", 64), 8) + ",v1=" + sig(i))
		}, p},
		{"empty secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("stripe", "").Sign(body(i), now)
		}, platform.Stripe.WithSecret("")},
	})
}

// FuzzStripeVerify checks that Stripe's Verify accepts a delivery only with
// a t within 300 s and a v1 entry that is the hex HMAC-SHA256 of
// "{t}.{body}".
func FuzzStripeVerify(f *testing.F) {
	body := []byte(stripePayload)
	ts := strconv.FormatInt(now.Unix(), 10)
	f.Add(body, "t="+ts+",v1="+stripeSig(stripeSecret, now.Unix(), body))
	f.Add(body, "t="+ts+",v1=bad_signature,v1="+stripeSig(stripeSecret, now.Unix(), body))
	f.Add(body, "t="+ts+",v0="+stripeSig(stripeSecret, now.Unix(), body))
	f.Add(body, "v1,t=1")
	f.Fuzz(func(t *testing.T, body []byte, hdr string) {
		_, err := platform.Stripe.WithSecret(stripeSecret).Verify(body, http.Header{"Stripe-Signature": {hdr}}, now)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			return
		}
		var t0 string
		var sigs []string
		for _, e := range strings.Split(hdr, ",") {
			e = strings.TrimSpace(e)
			if v, ok := strings.CutPrefix(e, "t="); ok {
				t0 = v
			} else if v, ok := strings.CutPrefix(e, "v1="); ok {
				sigs = append(sigs, strings.ToLower(v))
			}
		}
		n, perr := strconv.ParseInt(t0, 10, 64)
		require.NoError(t, perr)
		if len(t0) == 13 {
			n /= 1000
		}
		require.LessOrEqual(t, abs(now.Unix()-n), int64(300), "accepted a t %s away", t0)
		mac := hmac.New(sha256.New, []byte(stripeSecret))
		mac.Write([]byte(t0 + "."))
		mac.Write(body)
		require.Contains(t, sigs, hex.EncodeToString(mac.Sum(nil)), "accepted a signature that is not the body's")
	})
}
