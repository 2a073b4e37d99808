package multibot_test

import (
	"context"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/multibot"
)

// ExampleDispatcher shows two adapters delivering one group message: the
// normal route sees it once, the '!' route sees both copies, and the bot the
// user mentioned answers although another bot's copy came first.
func ExampleDispatcher() {
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	d := multibot.NewDispatcher(c, nil)
	d.Bots().Register("onebotv11", "111")
	d.Bots().Register("icqq", "222")

	d.Handle("message.group", multibot.EventHandlerFunc(func(ctx context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
		bot := d.PickReplyBot(ev, obs)
		fmt.Printf("command from %s via %s; reply as %s/%s\n", ev.UserID, ev.Identity.Adapter, bot.Adapter, bot.BotID)
		return nil
	}))
	d.Handle("!message", multibot.EventHandlerFunc(func(ctx context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
		fmt.Printf("audit: %s/%s duplicate=%v\n", ev.Identity.Adapter, ev.Identity.MessageID, obs.Duplicate)
		return nil
	}))

	content := []dedupe.Segment{
		{Type: "at", Data: map[string]any{"qq": 222}},
		{Type: "text", Data: map[string]any{"text": " /weather"}},
	}
	for _, ev := range []*dedupe.Event{
		{Kind: "message", MessageType: "group", GroupID: "100", UserID: "20001", Segments: content,
			Identity: dedupe.Identity{Adapter: "onebotv11", BotID: "111", MessageID: "1841", Timestamp: time.Unix(1_700_000_000, 0)}},
		{Kind: "message", MessageType: "group", GroupID: "100", UserID: "20001", Segments: content,
			Identity: dedupe.Identity{Adapter: "icqq", BotID: "222", MessageID: "x-77", Timestamp: time.Unix(1_700_000_000, 0)}},
	} {
		if err := d.Dispatch(context.Background(), ev); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// command from 20001 via onebotv11; reply as icqq/222
	// audit: onebotv11/1841 duplicate=false
	// audit: icqq/x-77 duplicate=true
}
