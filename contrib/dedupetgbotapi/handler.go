package dedupetgbotapi

import (
	"context"
	"errors"
	"strconv"

	"github.com/gatewaykit/dedupe"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// DefaultChannel is the key channel of a [Handler] given an empty one.
const DefaultChannel = "telegram"

// HandlerFunc processes one update. Its error means the update was not
// processed and should be delivered again.
type HandlerFunc func(ctx context.Context, u tgbotapi.Update) error

// Handler returns a HandlerFunc that runs h under [dedupe.Deduper.Do], keyed
// by the update's id in channel ([DefaultChannel] if empty; it must be a valid
// [dedupe.Key] channel).
//
// The HandlerFunc returns h's error; nil for a duplicate, which is dropped
// without running h; [dedupe.ErrInFlight] for a copy that another call is
// processing; and a store's error, without running h. An update whose id is 0
// (one made by hand, not by Telegram) runs h without deduplication.
//
// opts apply over d's options for this handler alone (see
// [dedupe.Deduper.With]): for example [dedupe.WithTTL] for Telegram's
// redelivery window, or [dedupe.WithWait]. The HandlerFunc is safe for
// concurrent use.
func Handler(d *dedupe.Deduper, channel string, h HandlerFunc, opts ...dedupe.Option) HandlerFunc {
	if len(opts) > 0 {
		d = d.With(opts...)
	}
	if channel == "" {
		channel = DefaultChannel
	}
	return func(ctx context.Context, u tgbotapi.Update) error {
		if u.UpdateID == 0 {
			return h(ctx, u)
		}
		key := dedupe.Key{Channel: channel, MessageID: strconv.Itoa(u.UpdateID)}
		ran := false
		err := d.Do(ctx, key, func(ctx context.Context) error {
			ran = true
			return h(ctx, u)
		})
		if !ran && errors.Is(err, dedupe.ErrDuplicate) {
			return nil
		}
		return err
	}
}
