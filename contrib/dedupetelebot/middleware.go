package dedupetelebot

import (
	"context"
	"errors"
	"strconv"

	"github.com/gatewaykit/dedupe"
	tele "gopkg.in/telebot.v3"
)

// DefaultChannel is the key channel of a [Middleware] given an empty one.
const DefaultChannel = "telegram"

// Middleware returns a [tele.MiddlewareFunc] that runs the handler of each
// update under [dedupe.Deduper.Do], keyed by the update's id in channel
// ([DefaultChannel] if empty; it must be a valid [dedupe.Key] channel). Pass
// it to [tele.Bot.Use] before registering the handlers, or to one
// [tele.Bot.Handle] or [tele.Group].
//
// The middleware returns the handler's error; nil for a duplicate, which is
// dropped without running the handler; [dedupe.ErrInFlight] for a copy that
// another handler is processing; and a store's error, without running the
// handler. An update whose id is 0 (one made by hand, not by Telegram) runs
// the handler without deduplication.
//
// opts apply over d's options for this middleware alone (see
// [dedupe.Deduper.With]): for example [dedupe.WithTTL] for Telegram's
// redelivery window, or [dedupe.WithWait]. The middleware is safe for
// concurrent use, as the bot runs handlers in goroutines of their own.
func Middleware(d *dedupe.Deduper, channel string, opts ...dedupe.Option) tele.MiddlewareFunc {
	if len(opts) > 0 {
		d = d.With(opts...)
	}
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
			if !ran && errors.Is(err, dedupe.ErrDuplicate) {
				return nil
			}
			return err
		}
	}
}
