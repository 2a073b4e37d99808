package dedupegotelegram_test

import (
	"context"
	"fmt"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupegotelegram"
	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

func ExampleMiddleware() {
	d := dedupe.New(nil) // a memory store; Redis or PostgreSQL for several replicas
	b, err := bot.New("123:token",
		bot.WithMiddlewares(dedupegotelegram.Middleware(d, "telegram")),
		bot.WithDefaultHandler(func(ctx context.Context, b *bot.Bot, u *models.Update) {
			fmt.Println("handled update", u.ID, u.Message.Text)
		}),
		// These two keep the example off the network and in order; a real
		// bot calls b.Start(ctx) or b.StartWebhook(ctx).
		bot.WithSkipGetMe(), bot.WithNotAsyncHandlers())
	if err != nil {
		panic(err)
	}

	u := &models.Update{ID: 1001, Message: &models.Message{Text: "hi"}}
	b.ProcessUpdate(context.Background(), u)
	b.ProcessUpdate(context.Background(), u) // Telegram's retry of the webhook: dropped
	fmt.Println(d.Stats().Duplicates, "duplicate")
	// Output:
	// handled update 1001 hi
	// 1 duplicate
}
