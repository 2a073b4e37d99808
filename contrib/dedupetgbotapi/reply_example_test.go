package dedupetgbotapi_test

import (
	"context"
	"strconv"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupetgbotapi"
	"github.com/gatewaykit/dedupe/reply"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// A reply to each update sent at most once, through the Telegram preset: a
// redelivered update finds its reply sent; a send whose outcome was unknown
// is reported with reply.ErrMaybeLost, never sent twice.
func ExampleSendMessage() {
	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram)
	handle := func(ctx context.Context, b *tgbotapi.BotAPI, u tgbotapi.Update) error {
		if u.Message == nil {
			return nil
		}
		key := dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(u.UpdateID)}
		compose := func(context.Context) ([]byte, error) { return []byte("pong"), nil }
		_, err := sender.Send(ctx, key, 0, compose,
			dedupetgbotapi.SendMessage(b, tgbotapi.NewMessage(u.Message.Chat.ID, "")))
		return err
	}
	_ = handle
}
