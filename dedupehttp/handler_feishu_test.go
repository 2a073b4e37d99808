package dedupehttp_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// flipFeishuIV rewrites the first 16 bytes of the plaintext of an encrypted
// Feishu body from `from` to `to` by flipping bits of its IV, without the key.
func flipFeishuIV(t *testing.T, body []byte, from, to string) []byte {
	t.Helper()
	var e struct{ Encrypt string }
	require.NoError(t, json.Unmarshal(body, &e))
	raw, err := base64.StdEncoding.DecodeString(e.Encrypt)
	require.NoError(t, err)
	for i := range 16 {
		raw[i] ^= from[i] ^ to[i]
	}
	out, err := json.Marshal(map[string]string{"encrypt": base64.StdEncoding.EncodeToString(raw)})
	require.NoError(t, err)
	return out
}

// TestFeishuEncryptedCheckNeverReachesHandler serves Feishu's encrypted,
// unsigned request URL check, a copy with IV bits flipped, and 100 replays,
// over a real server: the middleware answers the check itself, so no
// plaintext of an unsigned delivery reaches the handler or the store (before
// this was fixed, all of them reached the handler, the flipped one with the
// attacker's plaintext).
func TestFeishuEncryptedCheckNeverReachesHandler(t *testing.T) {
	s := platformtest.NewSigner("feishu", "encrypt-key")
	store := newRecordingStore()
	var mu sync.Mutex
	var seen [][]byte
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := dedupehttp.Body(r)
		mu.Lock()
		seen = append(seen, append([]byte(nil), b...))
		mu.Unlock()
	})
	// The check of platform/testdata/feishu_url_verification.json, compact.
	check := s.Encrypt([]byte(`{"challenge":"ajls384kdjx98XX","token":"xxxxxx","type":"url_verification"}`))

	t.Run("with the Verification Token", func(t *testing.T) {
		p := s.Preset(platform.Feishu).WithVerificationToken("xxxxxx")
		srv := serve(t, dedupehttp.New(dedupe.New(store), p, handler, dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet)))

		r := post(srv, check)
		assert.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "protocol", r.verdict)
		assert.JSONEq(t, `{"challenge":"ajls384kdjx98XX"}`, r.body)

		r = post(srv, flipFeishuIV(t, check, `{"challenge":"aj`, `{"challenge":"ZZ`))
		assert.Equal(t, http.StatusOK, r.status)
		assert.JSONEq(t, `{"challenge":"ZZls384kdjx98XX"}`, r.body, "the attacker gets an identifier back, nothing else")
		r = post(srv, flipFeishuIV(t, check, `{"challenge":"aj`, `{"x":"","challen`))
		assert.Equal(t, http.StatusUnauthorized, r.status)

		answered := 0
		for range 100 {
			if r := post(srv, check); r.status == http.StatusOK && r.verdict == "protocol" {
				answered++
			}
		}
		assert.Equal(t, 100, answered, "replays are answered by the middleware")

		event := s.Encrypt(platformFixture(t, "feishu_message_push1.json"))
		assert.Equal(t, http.StatusUnauthorized, post(srv, event).status, "an unsigned event")
		assert.Equal(t, http.StatusUnauthorized, deliver(srv.Config.Handler, flipFeishuIV(t, event, `{"schema":"2.0",`, `{"schema":"1.0",`), s.Sign(event, clock)).Code,
			"a signed event with its IV flipped")
	})

	t.Run("without it", func(t *testing.T) {
		srv := serve(t, dedupehttp.New(dedupe.New(store), s.Preset(platform.Feishu), handler, dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet)))
		for range 100 {
			assert.Equal(t, http.StatusUnauthorized, post(srv, check).status)
		}
	})

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, seen, "the handler saw nothing")
	assert.Zero(t, store.writes.Load(), "the store saw nothing")
}
