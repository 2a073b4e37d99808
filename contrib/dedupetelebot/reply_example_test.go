package dedupetelebot_test

import (
	"context"
	"strconv"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupetelebot"
	"github.com/gatewaykit/dedupe/reply"
	tele "gopkg.in/telebot.v3"
)

// A reply to each update sent at least once: a send whose outcome was unknown
// (a timeout, a 5xx) is sent again by the next Send of the reply (a
// redelivery of the update), and its receipt says MaybeDuplicate. Without
// WithPolicy the Telegram preset sends at most once.
func ExampleSend() {
	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram,
		reply.WithPolicy(reply.AtLeastOnce))
	b, err := tele.NewBot(tele.Settings{Token: "123:token", Offline: true})
	if err != nil {
		return
	}
	b.Handle(tele.OnText, func(c tele.Context) error {
		key := dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(c.Update().ID)}
		compose := func(context.Context) ([]byte, error) { return []byte("pong"), nil }
		_, err := sender.Send(context.Background(), key, 0, compose, dedupetelebot.Send(b, c.Chat()))
		return err
	})
}
