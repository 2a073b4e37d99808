package dedupehttp_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// TestSignedMemberTwiceRefused posts, to presets given their secret, signed
// deliveries whose id member appears twice ({"update_id":1,"update_id":2}),
// each five times, through New and NewAsync: the id is ambiguous
// ([dedupe.ErrInvalidKey]), so each copy is answered 400 and none runs the
// handler. Before, the error also
// matched [dedupe.ErrNoMessageID]: every copy was served without
// deduplication and ran (5 of 5 for each preset).
func TestSignedMemberTwiceRefused(t *testing.T) {
	const copies = 5
	feishuPlain := `{"schema":"2.0","header":{"event_id":"e1","event_id":"e2","event_type":"card.action.trigger"}}`
	for _, tc := range []struct {
		signer string
		preset platform.Preset
		body   func(s *platformtest.Signer) []byte
	}{
		{"telegram", platform.Telegram, plainBody(`{"update_id":1,"update_id":2}`)},
		{"slack", platform.Slack, plainBody(`{"type":"event_callback","event_id":"Ev1","event_id":"Ev2"}`)},
		{"discord", platform.Discord, plainBody(`{"type":2,"id":"1","id":"2"}`)},
		{"qq", platform.QQ, plainBody(`{"op":0,"id":"E1","id":"E2"}`)},
		{"onebot", platform.OneBot, plainBody(`{"post_type":"message","self_id":1,"message_id":2,"message_id":3}`)},
		{"dingtalk", platform.DingTalk, plainBody(`{"msgId":"a","msgId":"b"}`)},
		{"stripe", platform.Stripe, plainBody(`{"id":"evt_1","object":"event","id":"evt_2"}`)},
		{"feishu", platform.Feishu, func(s *platformtest.Signer) []byte { return s.Encrypt([]byte(feishuPlain)) }},
	} {
		for _, mode := range []string{"New", "NewAsync"} {
			t.Run(tc.signer+"/"+mode, func(t *testing.T) {
				s := platformtest.NewSigner(tc.signer, "the-endpoint-secret-of-"+tc.signer)
				var ran atomic.Int32
				next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Add(1) })
				var h http.Handler
				if mode == "New" {
					h = dedupehttp.New(dedupe.New(nil), s.Preset(tc.preset), next, dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
				} else {
					a := dedupehttp.NewAsync(dedupe.New(nil), dedupehttp.FromPreset(s.Preset(tc.preset)), next,
						dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
					defer func() { require.NoError(t, a.Close(context.Background())) }()
					h = a
				}
				body := tc.body(s)
				for i := range copies {
					w := httptest.NewRecorder()
					r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
					for k, v := range s.Sign(body, clock) {
						r.Header[k] = v
					}
					h.ServeHTTP(w, r)
					assert.Equal(t, http.StatusBadRequest, w.Code, "copy %d: %s", i, w.Body)
				}
				if a, ok := h.(*dedupehttp.Async); ok {
					require.NoError(t, a.Close(context.Background())) // waits for anything queued
				}
				assert.Zero(t, ran.Load(), "copies of an ambiguous id that ran, of %d", copies)
			})
		}
	}
}

// plainBody returns a body func that ignores the signer.
func plainBody(b string) func(*platformtest.Signer) []byte {
	return func(*platformtest.Signer) []byte { return []byte(b) }
}
