package dedupehttp_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
)

// userRef is the sender.user_ref of the opt-in of meta_optin_user_ref.json,
// which no log record may quote.
const userRef = "cbp_7b3f1d5e-user-ref-from-checkbox"

// unkeyedBatches are batches of [keyed, one that cannot be keyed, keyed] of
// each batched platform: Meta's is Messenger's opt-in from the checkbox
// plugin, identified by sender.user_ref and without sender.id (Meta's
// messaging_optins reference, see platform/testdata), LINE's an event
// without webhookEventId, Matrix's an event without event_id. want are the
// ids of the two keyed events.
func unkeyedBatches(t *testing.T) map[string]struct {
	preset platform.Preset
	body   []byte
	want   []string
} {
	return map[string]struct {
		preset platform.Preset
		body   []byte
		want   []string
	}{
		"meta": {platform.Meta.WithSecret(eventsSecret), testdata(t, "meta_optin_user_ref.json"),
			[]string{"message:m_1457764197618:41d102a3e1ae206a38", "message:m_1457764197618:41d102a3e1ae206a39"}},
		"line": {linePreset(), []byte(`{"destination":"U0","events":[{"type":"message","webhookEventId":"01A"},` +
			`{"type":"follow","source":{"userId":"` + userRef + `"}},{"type":"message","webhookEventId":"01B"}]}`),
			[]string{"01A", "01B"}},
		"matrix": {platform.Matrix.WithSecret(eventsSecret), []byte(`{"events":[{"event_id":"$a:x","type":"m.room.message"},` +
			`{"type":"m.room.message","sender":"@` + userRef + `:x"},{"event_id":"$b:x","type":"m.room.message"}]}`),
			[]string{"$a:x", "$b:x"}},
	}
}

// deliverSigned posts body to h signed for p: LINE and Meta sign the body,
// a Matrix homeserver sends its hs_token.
func deliverSigned(h http.Handler, p platform.Preset, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	sign(r, body, eventsSecret)
	if p.Name == "matrix" {
		r.Header.Set("Authorization", "Bearer "+eventsSecret)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestEventsUnkeyedEventAlone delivers, on each batched platform, a batch
// of [keyed event, event that cannot be keyed, keyed event] three times:
// each keyed event runs once, the one without an id runs without
// deduplication on each delivery, in its place (verdict undeduplicated, no
// key), counted in Stats.Undeduplicated and logged at warn level with the
// platform and its place, never its content; every answer is 200. Under
// WithRefuseUndeduplicated it is refused alone and the others still run.
// Before, the whole batch was answered 400 every time and no event ran
// (Meta: 3 deliveries, 400 ×3, 0 of 2 messages run).
func TestEventsUnkeyedEventAlone(t *testing.T) {
	for name, c := range unkeyedBatches(t) {
		for _, refuse := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/refuse=%v", name, refuse), func(t *testing.T) {
				var logs logBuffer
				opts := []dedupehttp.Option{dedupehttp.WithLogger(logs.logger())}
				if refuse {
					opts = append(opts, dedupehttp.WithRefuseUndeduplicated())
				}
				var order []string
				h := dedupehttp.Events(dedupe.New(nil), c.preset, func(r *http.Request, ev platform.Event) error {
					key, verdict := dedupehttp.KeyFrom(r.Context())
					switch {
					case verdict != dedupehttp.VerdictUndeduplicated:
						assert.Equal(t, ev.Key(c.preset), key)
						assert.Equal(t, dedupehttp.VerdictNew, verdict)
						order = append(order, ev.ID)
					default:
						assert.Equal(t, dedupe.Key{}, key)
						assert.Equal(t, dedupehttp.VerdictUndeduplicated, verdict)
						order = append(order, "unkeyed")
					}
					return nil
				}, opts...)
				for range 3 {
					w := deliverSigned(h, c.preset, c.body)
					assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
				}
				want := []string{c.want[0], "unkeyed", c.want[1], "unkeyed", "unkeyed"}
				if refuse {
					want = c.want
				}
				assert.Equal(t, want, order, "each keyed event once, in its place")
				assert.Equal(t, uint64(3), h.Stats().Undeduplicated)
				assert.Zero(t, h.Stats().Malformed)

				recs := logs.records(t)
				require.NotEmpty(t, recs, "the event is logged")
				rec := recs[0]
				assert.Equal(t, "WARN", rec["level"])
				assert.Equal(t, c.preset.Name, rec["platform"])
				assert.EqualValues(t, 1, rec["event"])
				assert.Equal(t, map[bool]string{false: "served", true: "refused"}[refuse], rec["outcome"])
				assert.NotContains(t, logs.String(), userRef, "a record quotes the event's content")
				assert.NotContains(t, logs.String(), "1254459154682919", "a record quotes a sender")
			})
		}
	}
}

// TestEventsUnkeyedEventFails: an event served without deduplication whose
// handler fails gets the batch answered 500, as a failed event does, so
// that the platform delivers it again; the keyed events are not run again.
func TestEventsUnkeyedEventFails(t *testing.T) {
	c := unkeyedBatches(t)["meta"]
	runs := map[string]int{}
	h := dedupehttp.Events(dedupe.New(nil), c.preset, func(r *http.Request, ev platform.Event) error {
		runs[ev.ID]++
		if _, v := dedupehttp.KeyFrom(r.Context()); v == dedupehttp.VerdictUndeduplicated && runs[""] == 1 {
			return fmt.Errorf("opt-in not stored")
		}
		return nil
	}, dedupehttp.WithLogger(quiet))
	assert.Equal(t, http.StatusInternalServerError, deliverSigned(h, c.preset, c.body).Code)
	assert.Equal(t, http.StatusOK, deliverSigned(h, c.preset, c.body).Code)
	assert.Equal(t, map[string]int{c.want[0]: 1, "": 2, c.want[1]: 1}, runs)
	assert.False(t, strings.Contains(fmt.Sprint(runs), userRef))
}
