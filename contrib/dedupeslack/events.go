package dedupeslack

import (
	"context"
	"errors"

	"github.com/gatewaykit/dedupe"
	"github.com/slack-go/slack/slackevents"
)

// DefaultChannel is the key channel of [EventsAPI] and [SocketMode] given an
// empty one.
const DefaultChannel = "slack"

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
// forged request must not mark an event id. Answer 200 when the EventsHandler returns nil, and a 5xx
// status otherwise, so that Slack retries: after h's error, and after
// [dedupe.ErrInFlight] too, since the copy in flight may still fail.
//
// The EventsHandler returns h's error; nil for a duplicate, which is dropped
// without running h; [dedupe.ErrInFlight] for a copy that another call is
// processing; and a store's error, without running h. An event without an
// event id runs h without deduplication.
//
// opts apply over d's options for this handler alone (see
// [dedupe.Deduper.With]), for example [dedupe.WithTTL] or [dedupe.WithWait].
// The EventsHandler is safe for concurrent use.
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

// derive applies opts over d and defaults the channel.
func derive(d *dedupe.Deduper, channel string, opts []dedupe.Option) (*dedupe.Deduper, string) {
	if len(opts) > 0 {
		d = d.With(opts...)
	}
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
