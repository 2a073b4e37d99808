package dedupegotelegram_test

import (
	"context"
	"strconv"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupegotelegram"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// A reply to each update sent at most once: the Sender keeps its record in
// the store, so a redelivered update finds the reply sent and does not send it
// again; a send whose outcome was unknown is reported (reply.ErrMaybeLost)
// instead of being sent twice. reply.WithPolicy(reply.AtLeastOnce) sends it
// again instead.
func ExampleSendMessage() {
	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram)
	onUpdate := func(ctx context.Context, b *bot.Bot, u *models.Update) {
		if u.Message == nil {
			return
		}
		key := dedupe.Key{Channel: "telegram", MessageID: strconv.FormatInt(u.ID, 10)}
		compose := func(context.Context) ([]byte, error) { return []byte("pong"), nil }
		send := dedupegotelegram.SendMessage(b, bot.SendMessageParams{ChatID: u.Message.Chat.ID})
		_, _ = sender.Send(ctx, key, 0, compose, send)
	}
	_, _ = bot.New("123:token", bot.WithSkipGetMe(), bot.WithDefaultHandler(onUpdate))
}
