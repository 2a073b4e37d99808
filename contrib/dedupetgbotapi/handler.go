package dedupetgbotapi

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
)

// DefaultChannel is the key channel of a [Handler] given an empty one.
const DefaultChannel = "telegram"

// StoreTimeout bounds each store call of a [Handler] (see
// [dedupe.WithStoreTimeout]) unless its options say otherwise, whatever the
// caller's context allows: a store call without a deadline waits on a
// stalled server for as long as the driver lets it (pgx has no read timeout).
const StoreTimeout = 5 * time.Second

// HandlerFunc processes one update. Its error means the update was not
// processed and should be delivered again.
type HandlerFunc func(ctx context.Context, u tgbotapi.Update) error

// Handler returns a HandlerFunc that runs h under [dedupe.Deduper.Do], keyed
// by the update's id in channel ([DefaultChannel] if empty; it must be a valid
// [dedupe.Key] channel).
//
// The HandlerFunc follows [platform.Telegram]: a copy of an update that
// another call is processing waits up to its AckBudget (40 s) for that call's
// outcome ([dedupe.WithWait]), and runs h if the first failed; each store
// call is bounded by [StoreTimeout]. These replace d's own wait and store
// timeout; opts apply over them, and over d's other options, for this
// handler alone (see [dedupe.Deduper.With]).
//
// The HandlerFunc returns h's error; nil for a duplicate, which is dropped
// without running h; [dedupe.ErrInFlight] for a copy still in flight after
// the wait, which is not a failure (see [StatusCode]); and a store's error,
// without running h. An update whose id is 0 (one made by hand, not by
// Telegram) runs h without deduplication. The HandlerFunc is safe for
// concurrent use.
func Handler(d *dedupe.Deduper, channel string, h HandlerFunc, opts ...dedupe.Option) HandlerFunc {
	d = d.With(append([]dedupe.Option{
		dedupe.WithWait(platform.Telegram.AckBudget),
		dedupe.WithStoreTimeout(StoreTimeout),
	}, opts...)...)
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
