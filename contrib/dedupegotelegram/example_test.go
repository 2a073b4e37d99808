package dedupegotelegram_test

import (
	"context"
	"errors"
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

// A handler that returns an error: the error releases the update and goes to
// the bot's errors handler; no panic is needed.
func ExampleHandler() {
	d := dedupe.New(nil)
	onError := func(err error) { fmt.Println("error:", err) }
	failed := false
	onUpdate := func(ctx context.Context, b *bot.Bot, u *models.Update) error {
		if !failed {
			failed = true
			return errors.New("chat service unavailable")
		}
		fmt.Println("handled update", u.ID)
		return nil
	}
	b, err := bot.New("123:token", bot.WithErrorsHandler(onError),
		bot.WithDefaultHandler(dedupegotelegram.Handler(d, "telegram", onUpdate, onError)),
		bot.WithSkipGetMe(), bot.WithNotAsyncHandlers())
	if err != nil {
		panic(err)
	}

	u := &models.Update{ID: 1001, Message: &models.Message{Text: "hi"}}
	b.ProcessUpdate(context.Background(), u) // fails: released
	b.ProcessUpdate(context.Background(), u) // a copy: processed
	b.ProcessUpdate(context.Background(), u) // and then a duplicate
	// Output:
	// error: dedupegotelegram: update 1001: chat service unavailable
	// handled update 1001
}
