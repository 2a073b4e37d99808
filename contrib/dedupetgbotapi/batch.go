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

// BatchFunc runs the updates of one getUpdates call ([tgbotapi.BotAPI.GetUpdates])
// and returns the offset to ask the next call with, and what each update
// got (see [Batch]).
type BatchFunc func(ctx context.Context, updates []tgbotapi.Update) (offset int, errs []error)

// Batch returns a BatchFunc that runs h once for each update of a batch,
// through [dedupe.Deduper.DoEach]: one claim round trip for the whole batch,
// and its marks and releases gathered, keyed as [Handler] keys an update
// ({channel}:{update_id}, channel [DefaultChannel] if empty). errs[i] is
// nil for updates[i] processed now, [dedupe.ErrDuplicate] for one processed
// already (a batch fetched again), and otherwise h's error,
// [dedupe.ErrInFlight] or a store's error. The updates run in order, one at
// a time; a [dedupe.WithConcurrency] option runs up to n at once.
//
// offset is where the next getUpdates call must start: Telegram confirms,
// and then forgets, every update whose update_id is below the offset a call
// is made with ("An update is considered confirmed as soon as getUpdates is
// called with an offset higher than its update_id", Bot API, getUpdates).
// So offset is the update_id of the first update of the batch that was
// neither processed nor a duplicate, and one past the last update when
// all of them were: a failed update is fetched again by the next call, with
// the updates after it, which were processed and are then duplicates,
// dropped without running h. A batch with no update returns offset 0: keep
// the offset you have.
//
// Telegram does not wait for the bot: an update fetched again runs after
// the updates after it ran, so a failure changes the order of the updates a
// handler sees. The defaults and opts are [Handler]'s: a copy in flight
// elsewhere is waited for up to [platform.Telegram]'s AckBudget, once the
// batch's other updates ran. The BatchFunc is safe for concurrent use, but
// Telegram answers only one getUpdates call of a bot at a time.
func Batch(d *dedupe.Deduper, channel string, h HandlerFunc, opts ...dedupe.Option) BatchFunc {
	d = d.With(append([]dedupe.Option{
		dedupe.WithWait(platform.Telegram.AckBudget),
		dedupe.WithStoreTimeout(StoreTimeout),
	}, opts...)...)
	if channel == "" {
		channel = DefaultChannel
	}
	return func(ctx context.Context, updates []tgbotapi.Update) (int, []error) {
		if len(updates) == 0 {
			return 0, nil
		}
		keys := make([]dedupe.Key, len(updates))
		for i, u := range updates {
			keys[i] = dedupe.Key{Channel: channel, MessageID: strconv.Itoa(u.UpdateID)}
		}
		errs := d.DoEach(ctx, keys, func(ctx context.Context, i int) error { return h(ctx, updates[i]) })
		return nextOffset(updates, errs), errs
	}
}

// nextOffset returns the least update_id of the updates not settled, or one
// past the greatest if all are (Telegram sends them in ascending order; this
// holds whatever the order).
func nextOffset(updates []tgbotapi.Update, errs []error) int {
	next, unsettled := 0, false
	for i, u := range updates {
		settled := errs[i] == nil || errors.Is(errs[i], dedupe.ErrDuplicate)
		switch {
		case !settled && (!unsettled || u.UpdateID < next):
			next, unsettled = u.UpdateID, true
		case !unsettled && u.UpdateID+1 > next:
			next = u.UpdateID + 1
		}
	}
	return next
}

// Poll receives the bot's updates by long polling until ctx ends: it calls
// getUpdates with cfg ([tgbotapi.BotAPI.GetUpdates]; set cfg.Timeout, in
// seconds, for long polling), runs each batch with run (a [Batch]), and
// makes the next call with the offset run returned, which confirms the
// updates before it and only those. A getUpdates error, and a batch whose
// first update was not settled (nothing to confirm), are followed by a
// pause (pause <= 0: one second) before the next call. Poll returns ctx's
// error; a getUpdates call in progress (up to cfg.Timeout) is not
// interrupted, the SDK's call taking no context.
//
// Unlike [tgbotapi.BotAPI.GetUpdatesChan], which moves its offset past
// each update before the update is processed, Poll confirms an update only
// once it was processed or found processed: a failed update is fetched
// again, by this process or, if it stops, by the next.
func Poll(ctx context.Context, api *tgbotapi.BotAPI, cfg tgbotapi.UpdateConfig, run BatchFunc, pause time.Duration) error {
	if pause <= 0 {
		pause = time.Second
	}
	for ctx.Err() == nil {
		updates, err := api.GetUpdates(cfg)
		stuck := err != nil
		if err == nil && len(updates) > 0 {
			next, _ := run(ctx, updates)
			stuck = next <= updates[0].UpdateID
			cfg.Offset = max(cfg.Offset, next)
		}
		if stuck {
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	return ctx.Err()
}
