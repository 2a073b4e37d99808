package dedupetelebot

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	tele "gopkg.in/telebot.v3"
)

// DefaultChannel is the key channel of a [Middleware] given an empty one.
const DefaultChannel = "telegram"

// StoreTimeout bounds each store call of a [Middleware] (see
// [dedupe.WithStoreTimeout]) unless its options say otherwise: telebot hands
// handlers no context, and a store call without a deadline waits on a
// stalled server for as long as the driver lets it (pgx has no read timeout).
const StoreTimeout = 5 * time.Second

// Middleware returns a [tele.MiddlewareFunc] that runs the handler of each
// update under [dedupe.Deduper.Do], keyed by the update's id in channel
// ([DefaultChannel] if empty; it must be a valid [dedupe.Key] channel). Pass
// it to [tele.Bot.Use] before registering the handlers, or to one
// [tele.Bot.Handle] or [tele.Group].
//
// The middleware follows [platform.Telegram]: a copy of an update that
// another handler is processing waits up to its AckBudget (40 s) for that
// handler's outcome ([dedupe.WithWait]), and runs if the first failed; each
// store call is bounded by [StoreTimeout]. These replace d's own wait and
// store timeout; opts apply over them, and over d's other options, for this
// middleware alone (see [dedupe.Deduper.With]), for example
// dedupe.WithWait(0) for a bot with Synchronous set, whose updates a wait
// would hold up.
//
// The middleware returns the handler's error, which reaches the bot's
// OnError; nil for a duplicate and for a copy still in flight after the wait,
// neither of which runs the handler (the Deduper logs them at debug level);
// and a store's error, without running the handler. An update whose id is 0
// (one made by hand, not by Telegram) runs the handler without
// deduplication. The middleware is safe for concurrent use, as the bot runs
// handlers in goroutines of their own.
func Middleware(d *dedupe.Deduper, channel string, opts ...dedupe.Option) tele.MiddlewareFunc {
	d = d.With(append([]dedupe.Option{
		dedupe.WithWait(platform.Telegram.AckBudget),
		dedupe.WithStoreTimeout(StoreTimeout),
	}, opts...)...)
	if channel == "" {
		channel = DefaultChannel
	}
	return func(next tele.HandlerFunc) tele.HandlerFunc {
		return func(c tele.Context) error {
			id := c.Update().ID
			if id == 0 {
				return next(c)
			}
			key := dedupe.Key{Channel: channel, MessageID: strconv.Itoa(id)}
			ran := false
			err := d.Do(context.Background(), key, func(context.Context) error {
				ran = true
				return next(c)
			})
			if !ran && (errors.Is(err, dedupe.ErrDuplicate) || errors.Is(err, dedupe.ErrInFlight)) {
				return nil
			}
			return err
		}
	}
}
