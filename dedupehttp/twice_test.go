package dedupehttp_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// TestSignedMemberTwiceRefused posts, to presets given their secret, signed
// deliveries whose id member appears twice ({"update_id":1,"update_id":2}),
// each five times: the id is ambiguous ([dedupe.ErrInvalidKey]), so each
// copy is answered 400 and none runs the handler. Before, the error also
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
		t.Run(tc.signer, func(t *testing.T) {
			s := platformtest.NewSigner(tc.signer, "the-endpoint-secret-of-"+tc.signer)
			ran := 0
			h := dedupehttp.New(dedupe.New(nil), s.Preset(tc.preset), http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran++ }),
				dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
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
			assert.Zero(t, ran, "copies of an ambiguous id that ran, of %d", copies)
		})
	}
}

// plainBody returns a body func that ignores the signer.
func plainBody(b string) func(*platformtest.Signer) []byte {
	return func(*platformtest.Signer) []byte { return []byte(b) }
}
