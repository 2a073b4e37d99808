package dedupeslack

import (
	"context"
	"errors"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/slack-go/slack/slackevents"
)

// DefaultChannel is the key channel of [EventsAPI] and [SocketMode] given an
// empty one.
const DefaultChannel = "slack"

// StoreTimeout bounds each store call of [EventsAPI] and [SocketMode] (see
// [dedupe.WithStoreTimeout]) unless their options say otherwise, whatever the
// caller's context allows: half of [platform.Slack]'s AckBudget, so that a
// stalled store still leaves time to answer within Slack's 3 seconds, and a
// socketmode handler, which gets no context, never waits on the store
// without a deadline.
const StoreTimeout = time.Second

// EventID returns the event_id of an Events API event, which Slack keeps across
// the retries of one event. ok is false for an event without one: a
// url_verification or app_rate_limited request, or an event that
// [slackevents.ParseEvent] could not parse.
func EventID(ev slackevents.EventsAPIEvent) (id string, ok bool) {
	cb, _ := ev.Data.(*slackevents.EventsAPICallbackEvent)
	if cb == nil || cb.EventID == "" {
		return "", false
	}
	return cb.EventID, true
}

// EventsHandler processes one Events API event. Its error means the event was
// not processed and Slack should deliver it again.
type EventsHandler func(ctx context.Context, ev slackevents.EventsAPIEvent) error

// EventsAPI returns an EventsHandler that runs h under [dedupe.Deduper.Do],
// keyed by the event's [EventID] in channel ([DefaultChannel] if empty; it
// must be a valid [dedupe.Key] channel), for the Events API over HTTP.
//
// Call the EventsHandler after the request's signature was verified
// (slack.NewSecretsVerifier) and its body parsed ([slackevents.ParseEvent]): a
// forged request must not mark an event id. Answer with [StatusCode] of what
// it returns: 200 for nil, 5xx otherwise, so that Slack retries.
//
// The EventsHandler follows [platform.Slack]: a copy of an event that another
// call is processing (Slack's retry of a delivery not answered within 3
// seconds) waits up to its AckBudget (2 s) for that call's outcome
// ([dedupe.WithWait]): nil if the first was processed, h's run if it failed.
// Each store call is bounded by [StoreTimeout]. These replace d's own wait
// and store timeout; opts apply over them, and over d's other options, for
// this handler alone (see [dedupe.Deduper.With]).
//
// The EventsHandler returns h's error; nil for a duplicate, which is dropped
// without running h; [dedupe.ErrInFlight] for a copy whose first is still
// running after the wait, which is not a failure: [StatusCode] answers it
// 503, so that Slack sends it again later; and a store's error, without
// running h. An event without an event id runs h without deduplication. The
// EventsHandler is safe for concurrent use.
func EventsAPI(d *dedupe.Deduper, channel string, h EventsHandler, opts ...dedupe.Option) EventsHandler {
	d, channel = derive(d, channel, opts)
	return func(ctx context.Context, ev slackevents.EventsAPIEvent) error {
		id, ok := EventID(ev)
		if !ok {
			return h(ctx, ev)
		}
		ran, err := do(ctx, d, dedupe.Key{Channel: channel, MessageID: id}, func(ctx context.Context) error {
			return h(ctx, ev)
		})
		if !ran && errors.Is(err, dedupe.ErrDuplicate) {
			return nil
		}
		return err
	}
}

// derive applies the defaults of [platform.Slack] and opts over d, and
// defaults the channel.
func derive(d *dedupe.Deduper, channel string, opts []dedupe.Option) (*dedupe.Deduper, string) {
	d = d.With(append([]dedupe.Option{
		dedupe.WithWait(platform.Slack.AckBudget),
		dedupe.WithStoreTimeout(StoreTimeout),
	}, opts...)...)
	if channel == "" {
		channel = DefaultChannel
	}
	return d, channel
}

// do runs fn under d.Do and reports whether fn ran, so that a duplicate is told
// apart from a handler's own error that wraps [dedupe.ErrDuplicate].
func do(ctx context.Context, d *dedupe.Deduper, key dedupe.Key, fn func(context.Context) error) (ran bool, err error) {
	err = d.Do(ctx, key, func(ctx context.Context) error {
		ran = true
		return fn(ctx)
	})
	return ran, err
}
