package dedupegotelegram

import (
	"context"
	"strconv"

	"github.com/gatewaykit/dedupe"
	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// DefaultChannel is the key channel of a [Middleware] given an empty one.
const DefaultChannel = "telegram"

// Middleware returns a [bot.Middleware] that runs the handler of each update
// under [dedupe.Deduper.Do] with the update's context, keyed by the update's
// id in channel ([DefaultChannel] if empty; it must be a valid [dedupe.Key]
// channel). Pass it to [bot.WithMiddlewares] or to one
// [bot.Bot.RegisterHandler].
//
// A duplicate, a copy in flight and an update whose claim failed are dropped
// without running the handler. An update whose id is 0 (one made by hand, not
// by Telegram) runs the handler without deduplication.
//
// opts apply over d's options for this middleware alone (see
// [dedupe.Deduper.With]): for example [dedupe.WithTTL] for Telegram's
// redelivery window, or [dedupe.WithWait]. The middleware is safe for
// concurrent use, as the bot runs handlers in goroutines of their own.
func Middleware(d *dedupe.Deduper, channel string, opts ...dedupe.Option) bot.Middleware {
	if len(opts) > 0 {
		d = d.With(opts...)
	}
	if channel == "" {
		channel = DefaultChannel
	}
	return func(next bot.HandlerFunc) bot.HandlerFunc {
		return func(ctx context.Context, b *bot.Bot, u *models.Update) {
			if u == nil || u.ID == 0 {
				next(ctx, b, u)
				return
			}
			key := dedupe.Key{Channel: channel, MessageID: strconv.FormatInt(u.ID, 10)}
			_ = d.Do(ctx, key, func(ctx context.Context) error {
				next(ctx, b, u)
				return nil
			})
		}
	}
}
