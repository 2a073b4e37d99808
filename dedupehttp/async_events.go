package dedupehttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
)

// NewAsyncEvents returns an [Async] for a platform that delivers several
// events in one request (p.Events: [platform.LINE], [platform.Meta],
// [platform.Matrix]), which accepts each batch durably and runs h once for
// each new event in the background: [Events] for handlers slower than the
// platform's timeout. Each event is pushed to q as its own message under
// its own key ([platform.Event].Key), and the batch is answered 200 with {}
// only once every event of it is in q, pushed now or live there already, or
// was processed before: nothing is acknowledged that q does not hold. For
// each request it:
//   - authenticates the delivery as [New] does: a forgery gets 401 and
//     touches neither the store nor q; a protocol request (LINE's URL
//     check: no events) is answered 200, a body whose events p.Events
//     cannot find 400;
//   - looks each event's key up ([dedupe.Deduper.Exists]) and skips those
//     processed already, then pushes the others to q ([queue.Queue.Push]),
//     which holds at most one live message per key: a redelivered batch
//     pushes nothing twice;
//   - answers 503 with Retry-After if the store or q failed, or q is full
//     ([queue.ErrFull]): the events pushed before stay in q, and the
//     platform's redelivery pushes the rest. An event whose id is invalid is
//     refused alone, and the batch answered 400 once the others are in q.
//
// The message of an event holds the whole (authenticated) body and the
// headers of [WithQueuedHeaders], so that h reads what the events of a
// batch share (LINE's destination, WhatsApp's metadata) from r as in
// [Events]. [WithWorkers] workers take the messages from q and run h under
// [dedupe.Deduper.Do] with the event's key, as [WithQueue] says: an event
// is processed once whatever q hands out twice, an error or panic of h
// fails that event's attempt alone (see [WithMaxAttempts]), and
// [WithDone] learns the end of each event. A worker finds its event again
// by running p.Events on the body: batches of many events cost that scan
// once per event.
//
// d is used with p's TTL and AckBudget. q must not be nil: a durable one
// ([queue.OpenSQLite], the Redis and PostgreSQL queues) loses no accepted
// event in a crash, [queue.NewMemory] keeps them in memory. [WithOverflow]
// and [WithQueueSize] do not apply; the [ContextWithObserver] observer is
// not called. Close the Async with [Async.Close], then q.
func NewAsyncEvents(d *dedupe.Deduper, p platform.Preset, h func(r *http.Request, ev platform.Event) error,
	q queue.Queue, opts ...AsyncOption) *Async {
	opts = append([]AsyncOption{WithVerify(p)}, opts...)
	opts = append(opts, WithQueue(q))
	a := NewAsync(presetDeduper(d, p), FromPreset(p), queuedEvent{p: p, h: h}, opts...)
	a.events = &p
	if p.Events == nil {
		a.c.log(context.Background(), slog.LevelError, "dedupe: dedupehttp: the preset has no Events func: every delivery will be answered 500",
			slog.String("platform", p.Name))
	}
	return a
}

// acceptEvents serves a batch for an Async of [NewAsyncEvents]. It ends the
// request enter counted.
func (a *Async) acceptEvents(w http.ResponseWriter, r *http.Request) {
	defer a.wg.Done()
	r, d := a.c.receive(w, r)
	if d == nil {
		return
	}
	b := &batch{e: &eventsHandler{p: *a.events, c: a.c}, r: r, d: d}
	if !b.events(w) {
		return
	}
	invalid := -1
	for i, ev := range b.evs {
		key := ev.Key(*a.events)
		if key.Validate() != nil {
			a.c.stats.malformed.Add(1)
			if invalid < 0 {
				invalid = i
			}
			continue
		}
		if why := a.pushEvent(r, key, d.body.data); why != "" {
			a.c.unavailable(w, why)
			return
		}
	}
	if invalid >= 0 {
		http.Error(w, fmt.Sprintf("bad request: event %d has an invalid id: %v", invalid,
			b.evs[invalid].Key(*a.events).Validate()), http.StatusBadRequest)
		return
	}
	w.Header().Set(HeaderVerdict, "queued")
	answerEmptyObject(w)
}

// pushEvent pushes the event keyed key of the batch r, whose body is data,
// to a's queue, unless it was processed already. It returns why it could
// not, or "" when the event is processed or in the queue.
func (a *Async) pushEvent(r *http.Request, key dedupe.Key, data []byte) string {
	ctx := r.Context()
	marked, err := a.d.Exists(ctx, key)
	switch {
	case err != nil:
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: store failed, asked the platform to retry the batch",
			slog.String("key", key.String()), slog.Any("error", err))
		return "message store unavailable"
	case marked:
		return ""
	}
	_, _, err = a.c.queue.Push(ctx, a.c.newMessage(r, key, data))
	switch {
	case errors.Is(err, queue.ErrFull):
		a.stats.full.Add(1)
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queue full, asked the platform to retry the batch",
			slog.String("key", key.String()))
		return "queue full"
	case err != nil:
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queue failed, asked the platform to retry the batch",
			slog.String("key", key.String()), slog.Any("error", err))
		return "queue unavailable"
	}
	return ""
}

// queuedEvent is the handler of the messages of [NewAsyncEvents]: it finds
// its event in the batch and runs the per-event handler on it.
type queuedEvent struct {
	p platform.Preset
	h func(*http.Request, platform.Event) error
}

// ServeHTTP runs the handler on the event of r whose key is r's, and
// answers 500 if it failed or is not found.
func (e queuedEvent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key, _ := KeyFrom(r.Context())
	data, err := Body(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	evs, err := e.p.Events(data, r.Header)
	if err != nil {
		http.Error(w, "dedupe: dedupehttp: queued batch: "+err.Error(), http.StatusInternalServerError)
		return
	}
	for _, ev := range evs {
		if ev.Key(e.p) == key {
			if err := e.h(r, ev); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return
		}
	}
	http.Error(w, "dedupe: dedupehttp: queued event "+key.String()+" not in its batch", http.StatusInternalServerError)
}
