package platform_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// The test values of GitHub's docs (Validating webhook deliveries, "Testing
// the webhook payload validation",
// https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
const (
	ghSecret    = "It's a Secret to Everybody"
	ghPayload   = "Hello, World!"
	ghSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	// ghDelivery is the X-GitHub-Delivery of the docs' example delivery
	// (Webhook events and payloads, Delivery headers).
	ghDelivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
)

// TestGitHubVectors runs the docs' test values, and keys the ping payload
// of octokit/webhooks (payload-examples/api.github.com/ping/
// with-app_id.payload.json, abridged in testdata/github_ping.json) by its
// delivery, a redelivery included.
func TestGitHubVectors(t *testing.T) {
	p := platform.GitHub.WithSecret(ghSecret)
	h := http.Header{"X-Hub-Signature-256": {ghSignature}, "X-Github-Delivery": {ghDelivery}}
	got, err := p.Verify([]byte(ghPayload), h, now)
	require.NoError(t, err)
	k, err := p.Extract(got, h)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Key{Channel: "github", MessageID: ghDelivery}, k)
	h.Set("X-Hub-Signature-256", strings.ToUpper(ghSignature[:7])+ghSignature[7:])
	_, err = p.Verify([]byte(ghPayload), h, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "the prefix is lower-case")
	_, err = p.Verify([]byte(ghPayload), http.Header{"X-Hub-Signature": {"sha1=" + strings.Repeat("0", 40)}}, now)
	assert.ErrorIs(t, err, platform.ErrUnauthenticated, "SHA-1 alone")

	s := platformtest.NewSigner("github", "the-github-webhook-secret")
	p = s.Preset(platform.GitHub)
	body := fixture(t, "github_ping.json")
	first := s.SignID(ghDelivery, body, now)
	redelivery := s.SignID(ghDelivery, body, now.Add(71*time.Hour)) // "the past 3 days"
	var keys []dedupe.Key
	for _, h := range []http.Header{first, redelivery} {
		got, err := p.Verify(body, h, now)
		require.NoError(t, err)
		k, err := p.Extract(got, h)
		require.NoError(t, err)
		keys = append(keys, k)
	}
	assert.Equal(t, keys[0], keys[1], "a redelivery is a copy")
	_, err = p.Extract(body, nil)
	assert.ErrorIs(t, err, dedupe.ErrNoMessageID, "no header, no key")
}

// TestGitHubForgeries sends 1,000 forged deliveries of eleven kinds.
func TestGitHubForgeries(t *testing.T) {
	const secret = "github-webhook-secret"
	s := platformtest.NewSigner("github", secret)
	p := s.Preset(platform.GitHub)
	base := fixture(t, "github_ping.json")
	body := func(i int) []byte { return numbered(base, "dilutes everything", i) }
	sig := func(i int) string { return s.Sign(body(i), now).Get("X-Hub-Signature-256") }
	header := func(v string) http.Header {
		return http.Header{"X-Hub-Signature-256": {v}, "X-Github-Delivery": {ghDelivery}}
	}
	runForgeries(t, secret, []forgery{
		{"wrong secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("github", strings.Repeat("g", i%40+1)).Sign(body(i), now)
		}, p},
		{"tampered body", func(i int) ([]byte, http.Header) {
			return bytes.Replace(body(i), []byte(`"active": true`), []byte(`"active": false`), 1), header(sig(i))
		}, p},
		{"signature of another body", func(i int) ([]byte, http.Header) { return body(i), header(sig(i + 1)) }, p},
		{"missing header", func(i int) ([]byte, http.Header) { return body(i), http.Header{"X-Github-Delivery": {ghDelivery}} }, p},
		{"malformed header", func(i int) ([]byte, http.Header) { return body(i), header("sha256=zz" + sig(i)[9:]) }, p},
		{"truncated signature", func(i int) ([]byte, http.Header) { return body(i), header(sig(i)[:7+i%64]) }, p},
		{"wrong scheme prefix", func(i int) ([]byte, http.Header) {
			return body(i), header([]string{"sha1=", "SHA256=", "v1,", ""}[i%4] + strings.TrimPrefix(sig(i), "sha256="))
		}, p},
		{"SHA-1 header only", func(i int) ([]byte, http.Header) {
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write(body(i))
			return body(i), http.Header{"X-Hub-Signature": {"sha1=" + hex.EncodeToString(mac.Sum(nil))[:40]}}
		}, p},
		{"two signatures", func(i int) ([]byte, http.Header) { return body(i), header(sig(i+1) + " " + sig(i)) }, p},
		{"base64 instead of hex", func(i int) ([]byte, http.Header) {
			return body(i), header("sha256=" + platformtest.NewSigner("line", secret).Sign(body(i), now).Get("X-Line-Signature"))
		}, p},
		{"empty secret", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("github", "").Sign(body(i), now)
		}, platform.GitHub.WithSecret("")},
	})
}

// FuzzGitHubVerify checks that GitHub's Verify accepts a delivery only when
// X-Hub-Signature-256 is "sha256=" and the hex HMAC-SHA256 of the body.
func FuzzGitHubVerify(f *testing.F) {
	f.Add([]byte(ghPayload), ghSignature)
	f.Add([]byte(ghPayload), strings.ToUpper(ghSignature))
	f.Add(fixture(f, "github_ping.json"), "sha256="+strings.Repeat("0", 64))
	f.Fuzz(func(t *testing.T, body []byte, sig string) {
		_, err := platform.GitHub.WithSecret(ghSecret).Verify(body, http.Header{"X-Hub-Signature-256": {sig}}, now)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			return
		}
		mac := hmac.New(sha256.New, []byte(ghSecret))
		mac.Write(body)
		rest, ok := strings.CutPrefix(sig, "sha256=")
		require.True(t, ok)
		got, derr := hex.DecodeString(rest)
		require.NoError(t, derr)
		require.Equal(t, mac.Sum(nil), got, "accepted a signature that is not the body's")
	})
}
