package dedupeslack

import (
	"context"
	"errors"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
)

// ackTimeout bounds the wait for room in the client's queue of responses: an
// acknowledgement later than Slack's 3 s deadline is of no use.
const ackTimeout = 3 * time.Second

// SocketModeHandler processes one Socket Mode event. Its error means the event
// was not processed: the envelope is not acknowledged, and Slack delivers the
// event again.
type SocketModeHandler func(evt *socketmode.Event, client *socketmode.Client) error

// SocketMode returns a [socketmode.SocketmodeHandlerFunc] that runs h under
// [dedupe.Deduper.Do], keyed by the [EventID] of the envelope's Events API
// event in channel ([DefaultChannel] if empty; it must be a valid [dedupe.Key]
// channel), and acknowledges the envelope itself, so h must not:
//
//	new event, h returns nil     marked, acknowledged
//	new event, h fails or panics released, not acknowledged: Slack retries, and the retry is processed
//	duplicate                    acknowledged, so that Slack stops retrying; h does not run
//	copy in flight               not acknowledged: Slack retries later (see below); h does not run
//	store error                  not acknowledged; h does not run
//
// Register it for Events API events: with [socketmode.SocketmodeHandler.HandleEvents],
// or Handle([socketmode.EventTypeEventsAPI], …), or call it from a loop over
// the client's Events, in a goroutine of its own per event. An event without
// an event id (another kind of envelope) runs h without deduplication and is
// acknowledged if h returns nil; slash commands and interactions, which
// Slack does not retry and which are often acknowledged with a payload, are
// best handled without it.
//
// SocketMode follows [platform.Slack]: a retry of an event that another
// call is processing (Slack retries an envelope not acknowledged within 3
// seconds) waits up to its AckBudget (2 s) for that call's outcome
// ([dedupe.WithWait]): acknowledged if the first succeeded, processed if it
// failed, and left unacknowledged if the first is still running, so that
// Slack sends it again later. Each store call is bounded by [StoreTimeout],
// since socketmode handlers get no context. These replace d's own wait and
// store timeout; opts apply over them, and over d's other options, for this
// handler alone (see [dedupe.Deduper.With]). The handler is safe for
// concurrent use; [socketmode.SocketmodeHandler] runs each in a goroutine of
// its own, so a wait holds up no other event.
func SocketMode(d *dedupe.Deduper, channel string, h SocketModeHandler, opts ...dedupe.Option) socketmode.SocketmodeHandlerFunc {
	d, channel = derive(d, channel, opts)
	return func(evt *socketmode.Event, client *socketmode.Client) {
		ev, _ := evt.Data.(slackevents.EventsAPIEvent)
		id, ok := EventID(ev)
		if evt.Type != socketmode.EventTypeEventsAPI || !ok {
			if h(evt, client) == nil {
				ack(evt, client)
			}
			return
		}
		ran, err := do(context.Background(), d, dedupe.Key{Channel: channel, MessageID: id}, func(context.Context) error {
			return h(evt, client)
		})
		if err == nil || !ran && errors.Is(err, dedupe.ErrDuplicate) {
			ack(evt, client)
		}
	}
}

// ack acknowledges evt's envelope, if it came in one.
func ack(evt *socketmode.Event, client *socketmode.Client) {
	if evt.Request == nil || evt.Request.EnvelopeID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	_ = client.AckCtx(ctx, evt.Request.EnvelopeID, nil)
}
