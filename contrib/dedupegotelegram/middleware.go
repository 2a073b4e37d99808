package dedupegotelegram

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
)

// DefaultChannel is the key channel of a [Middleware] or [Handler] given an
// empty one.
const DefaultChannel = "telegram"

// StoreTimeout bounds each store call of a [Middleware] or [Handler] (see
// [dedupe.WithStoreTimeout]) unless its options say otherwise, whatever the
// bot's context allows: a store call without a deadline waits on a stalled
// server for as long as the driver lets it (pgx has no read timeout).
const StoreTimeout = 5 * time.Second

// Middleware returns a [bot.Middleware] that runs the handler of each update
// under [dedupe.Deduper.Do] with the update's context, keyed by the update's
// id in channel ([DefaultChannel] if empty; it must be a valid [dedupe.Key]
// channel). Pass it to [bot.WithMiddlewares] or to one
// [bot.Bot.RegisterHandler].
//
// A go-telegram/bot handler returns nothing, so under the middleware it
// fails only by panicking: the update is released and the panic goes on. A
// handler that reports failure with an error is wrapped by [Handler]
// instead, which needs no panic.
//
// The middleware follows [platform.Telegram]: a copy of an update that
// another handler is processing waits up to its AckBudget (40 s) for that
// handler's outcome ([dedupe.WithWait]), and runs if the first failed; each
// store call is bounded by [StoreTimeout]. These replace d's own wait and
// store timeout; opts apply over them, and over d's other options, for this
// middleware alone (see [dedupe.Deduper.With]).
//
// A duplicate, a copy still in flight after the wait and an update whose
// claim failed are dropped without running the handler (the Deduper logs
// them, see [dedupe.WithLogger]). An update whose id is 0 (one made by hand,
// not by Telegram) runs the handler without deduplication. The middleware is
// safe for concurrent use, as the bot runs handlers in goroutines of their
// own.
func Middleware(d *dedupe.Deduper, channel string, opts ...dedupe.Option) bot.Middleware {
	d, channel = derive(d, channel, opts)
	return func(next bot.HandlerFunc) bot.HandlerFunc {
		return func(ctx context.Context, b *bot.Bot, u *models.Update) {
			if u == nil || u.ID == 0 {
				next(ctx, b, u)
				return
			}
			_, _ = do(ctx, d, channel, u, func(ctx context.Context) error {
				next(ctx, b, u)
				return nil
			})
		}
	}
}

// derive applies the defaults of [platform.Telegram] and opts over d, and
// defaults the channel.
func derive(d *dedupe.Deduper, channel string, opts []dedupe.Option) (*dedupe.Deduper, string) {
	d = d.With(append([]dedupe.Option{
		dedupe.WithWait(platform.Telegram.AckBudget),
		dedupe.WithStoreTimeout(StoreTimeout),
	}, opts...)...)
	if channel == "" {
		channel = DefaultChannel
	}
	return d, channel
}

// do runs fn under d.Do for update u, and reports whether fn ran. A
// duplicate, and a copy still in flight after the wait, return nil.
func do(ctx context.Context, d *dedupe.Deduper, channel string, u *models.Update, fn func(context.Context) error) (ran bool, err error) {
	key := dedupe.Key{Channel: channel, MessageID: strconv.FormatInt(u.ID, 10)}
	err = d.Do(ctx, key, func(ctx context.Context) error {
		ran = true
		return fn(ctx)
	})
	if !ran && (errors.Is(err, dedupe.ErrDuplicate) || errors.Is(err, dedupe.ErrInFlight)) {
		return false, nil
	}
	return ran, err
}
