package dedupe_test

import (
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
)

// ExampleEventCorrelator shows two bots delivering one message, a third bot
// that missed it, and the user sending the same text again seconds later:
// the send time keeps the third bot's copy of the repeat out of the first
// message's group.
func ExampleEventCorrelator() {
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	sent := time.Unix(1_700_000_000, 0)
	msg := func(adapter, bot, id string, sentAt time.Time) *dedupe.Event {
		return &dedupe.Event{
			Kind: "message", MessageType: "group", GroupID: "100", UserID: "20001",
			Identity: dedupe.Identity{Adapter: adapter, BotID: bot, MessageID: id, Timestamp: sentAt},
			Segments: []dedupe.Segment{{Type: "text", Data: map[string]any{"text": "+1"}}},
		}
	}
	for _, ev := range []*dedupe.Event{
		msg("onebotv11", "111", "m1", sent),
		msg("icqq", "222", "n1", sent),
		msg("onebotv11", "333", "o2", sent.Add(4*time.Second)), // 333 missed the first "+1"
		msg("onebotv11", "111", "m2", sent.Add(4*time.Second)),
	} {
		obs := c.Observe(ev)
		fmt.Printf("%s/%s duplicate=%v primary=%s\n", ev.Identity.BotID, ev.Identity.MessageID, obs.Duplicate, obs.Primary.MessageID)
	}
	st := c.Stats()
	fmt.Printf("groups=%d refused by send time=%d\n", st.Groups, st.TimeRefused)
	// Output:
	// 111/m1 duplicate=false primary=m1
	// 222/n1 duplicate=true primary=m1
	// 333/o2 duplicate=false primary=o2
	// 111/m2 duplicate=true primary=o2
	// groups=2 refused by send time=1
}
