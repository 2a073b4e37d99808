package dedupeline_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupeline"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"
)

// A reply pushed once: the Sender records it in the store before sending,
// PushMessage sends it with the reply's retry key, and a Send of the same
// reply after a timeout or a 5xx pushes it again with the same key, which
// LINE answers 409 rather than delivering it twice.
func ExamplePushMessage() {
	bot, err := messaging_api.NewMessagingApiAPI("channel-access-token")
	if err != nil {
		return
	}
	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.LINE)
	key := dedupe.Key{Channel: "line", MessageID: "01H8Z3Q4"} // the webhook event's webhookEventId
	compose := func(context.Context) ([]byte, error) {
		return json.Marshal(&messaging_api.PushMessageRequest{
			To:       "U4af4980629",
			Messages: []messaging_api.MessageInterface{messaging_api.TextMessage{Text: "pong"}},
		})
	}
	send := dedupeline.PushMessage(bot)
	_ = func(ctx context.Context) {
		rc, err := sender.Send(ctx, key, 0, compose, send)
		fmt.Println(rc.ID, err)
	}
}
