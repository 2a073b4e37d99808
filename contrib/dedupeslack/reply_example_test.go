package dedupeslack_test

import (
	"context"
	"encoding/json"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupeslack"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
)

// A reply to a Slack message sent once: the Sender keeps its record in the
// store; PostMessage attaches the reply's token as message metadata, and
// Check looks for it in the channel's history before a reply whose send's
// outcome is unknown is sent again.
func ExamplePostMessage() {
	api := slack.New("xoxb-bot-token")
	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Slack,
		reply.WithCheck(dedupeslack.Check(api, 0)))
	onEvent := func(ctx context.Context, ev slackevents.EventsAPIEvent) error {
		msg, ok := ev.InnerEvent.Data.(*slackevents.MessageEvent)
		id, _ := dedupeslack.EventID(ev)
		if !ok || msg.BotID != "" {
			return nil
		}
		compose := func(ctx context.Context) ([]byte, error) {
			return json.Marshal(dedupeslack.ReplyBody{Channel: msg.Channel, Text: "pong", ThreadTS: msg.TimeStamp})
		}
		_, err := sender.Send(ctx, dedupe.Key{Channel: "slack", MessageID: id}, 0, compose, dedupeslack.PostMessage(api))
		return err
	}
	_ = dedupeslack.EventsAPI(dedupe.New(nil), dedupeslack.DefaultChannel, onEvent)
}
