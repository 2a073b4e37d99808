package platform_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// TestMemberTwiceIsInvalidKey gives every preset a body in which a member
// its id is read from (or a member on the way to it) appears twice, at each
// level the preset reads: the id is ambiguous, which is
// [dedupe.ErrInvalidKey] and not [dedupe.ErrNoMessageID], so that package
// dedupehttp refuses the delivery instead of serving it without
// deduplication, where every copy runs. Before, each of these was both, and
// was served without deduplication.
func TestMemberTwiceIsInvalidKey(t *testing.T) {
	nested, err := platform.NewPreset(platform.Rule{
		Name: "nested", ID: "/data/object/id",
		Signature: platform.SignatureRule{Header: "X-Sig", Encoding: "hex"},
	})
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		preset platform.Preset
		body   string
	}{
		{"telegram update_id", platform.Telegram, `{"update_id":1,"update_id":2}`},
		{"slack event_id", platform.Slack, `{"type":"event_callback","event_id":"Ev1","event_id":"Ev2"}`},
		{"slack type", platform.Slack, `{"type":"event_callback","type":"x","event_id":"Ev1"}`},
		{"slack payload trigger_id", platform.Slack, `payload=%7B%22trigger_id%22%3A%221%22%2C%22trigger_id%22%3A%222%22%7D`},
		{"discord id", platform.Discord, `{"type":2,"id":"1","id":"2"}`},
		{"feishu header", platform.Feishu, `{"schema":"2.0","header":{"event_id":"e1"},"header":{"event_id":"e2"}}`},
		{"feishu header.event_id", platform.Feishu, `{"schema":"2.0","header":{"event_id":"e1","event_id":"e2"}}`},
		{"feishu event.message.message_id", platform.Feishu,
			`{"schema":"2.0","header":{"event_id":"e1","event_type":"im.message.receive_v1"},"event":{"message":{"message_id":"om_1","message_id":"om_2"}}}`},
		{"feishu 1.0 uuid", platform.Feishu, `{"uuid":"u1","uuid":"u2","event":{"type":"x"}}`},
		{"qq id", platform.QQ, `{"op":0,"id":"E1","id":"E2"}`},
		{"onebot message_id", platform.OneBot, `{"post_type":"message","self_id":1,"message_id":2,"message_id":3}`},
		{"onebot self_id", platform.OneBot, `{"post_type":"message","self_id":1,"self_id":2,"message_id":3}`},
		{"dingtalk msgId", platform.DingTalk, `{"msgId":"a","msgId":"b"}`},
		{"dingtalk-events EventType", platform.DingTalkEvents, `{"EventType":"a","EventType":"b"}`},
		{"line webhookEventId", platform.LINE, `{"events":[{"webhookEventId":"A","webhookEventId":"B"}]}`},
		{"line events", platform.LINE, `{"events":[],"events":[{"webhookEventId":"A"}]}`},
		{"meta mid", platform.Meta, `{"object":"page","entry":[{"messaging":[{"sender":{"id":"1"},"message":{"mid":"m1","mid":"m2"}}]}]}`},
		{"meta whatsapp id", platform.Meta, `{"entry":[{"changes":[{"value":{"messages":[{"id":"w1","id":"w2"}]}}]}]}`},
		{"matrix event_id", platform.Matrix, `{"events":[{"event_id":"$a","event_id":"$b"}]}`},
		{"stripe id", platform.Stripe, `{"id":"evt_1","object":"event","id":"evt_2"}`},
		{"rule pointer, leaf", nested, `{"data":{"object":{"id":"a","id":"b"}}}`},
		{"rule pointer, on the way", nested, `{"data":{"object":{"id":"a"}},"data":{"object":{"id":"b"}}}`},
		{"rule pointer, middle", nested, `{"data":{"object":{"id":"a"},"object":{"id":"b"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.preset.Events != nil {
				var evs []platform.Event
				evs, err = tc.preset.Events([]byte(tc.body), nil)
				for _, ev := range evs { // an event of the batch refused alone (Event.Err)
					if err == nil && ev.Err != nil {
						err = ev.Err
					}
				}
				assert.ErrorIs(t, err, dedupe.ErrInvalidKey, "Events")
				assert.NotErrorIs(t, err, dedupe.ErrNoMessageID, "Events")
			}
			_, err = tc.preset.Extract([]byte(tc.body), http.Header{"X-Self-Id": {"1"}})
			assert.ErrorIs(t, err, dedupe.ErrInvalidKey)
			assert.NotErrorIs(t, err, dedupe.ErrNoMessageID, "an ambiguous id is not a missing one: %v", err)
		})
	}
}
