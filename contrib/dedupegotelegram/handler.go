package dedupegotelegram

import (
	"context"
	"fmt"
	"log"

	"github.com/gatewaykit/dedupe"
	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// HandlerFunc processes one update, as a [bot.HandlerFunc] does, and returns
// an error if the update was not processed.
type HandlerFunc func(ctx context.Context, b *bot.Bot, u *models.Update) error

// Handler returns a [bot.HandlerFunc] that runs h under [dedupe.Deduper.Do]
// with the update's context, keyed by the update's id in channel
// ([DefaultChannel] if empty; it must be a valid [dedupe.Key] channel).
// Register it with [bot.WithDefaultHandler] or [bot.Bot.RegisterHandler].
//
// h's nil marks the update processed. h's error releases the update (a copy
// waiting for it then runs, see [Middleware]) and is passed to onError
// wrapped with the update's id, as is a store's error, which leaves h unrun;
// pass the function given to [bot.WithErrorsHandler], or nil to log with the
// standard logger as the bot's default errors handler does. A duplicate, and
// a copy still in flight after the wait, are dropped without running h and
// are not errors. A panic in h releases the update and goes on. An update
// whose id is 0 runs h without deduplication.
//
// Handler follows [platform.Telegram] as [Middleware] does; opts apply over
// those defaults and d's options. The bot acknowledges an update before h
// runs (see the package overview), so an error does not make Telegram
// deliver it again. The handler is safe for concurrent use.
func Handler(d *dedupe.Deduper, channel string, h HandlerFunc, onError bot.ErrorsHandler, opts ...dedupe.Option) bot.HandlerFunc {
	d, channel = derive(d, channel, opts)
	if onError == nil {
		onError = func(err error) { log.Printf("[TGBOT] [ERROR] %v", err) }
	}
	return func(ctx context.Context, b *bot.Bot, u *models.Update) {
		var err error
		if u == nil || u.ID == 0 {
			err = h(ctx, b, u)
		} else {
			_, err = do(ctx, d, channel, u, func(ctx context.Context) error { return h(ctx, b, u) })
		}
		if err != nil {
			onError(fmt.Errorf("dedupegotelegram: update %d: %w", updateID(u), err))
		}
	}
}

// updateID is u's id, 0 for a nil update.
func updateID(u *models.Update) int64 {
	if u == nil {
		return 0
	}
	return u.ID
}
