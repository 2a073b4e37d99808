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

// NewAsyncEvents returns an [Async] for a platform that batches its events
// (p.Events: [platform.LINE], [platform.Meta], [platform.Matrix]): [Events]
// for handlers slower than the platform's timeout. A batch is authenticated
// as by [New] (a forgery gets 401 and touches neither the store nor q);
// then each event not processed yet ([dedupe.Deduper.Exists]) is pushed to
// q as its own message under its own key, and the batch is answered 200 {}
// only once every event is in q or processed: nothing is acknowledged that
// q does not hold, and a redelivered batch pushes nothing twice (q holds one
// live message per key). A store or q failure, or a full q, is answered 503
// with Retry-After (the events pushed stay in q); an event with an invalid
// id is refused alone, with 400 once the others are in q. [WithWorkers]
// workers run h under [dedupe.Deduper.Do] with each event's key, as
// [WithQueue] says: once per event whatever q hands out twice, an error or
// panic failing that event's attempt alone ([WithMaxAttempts], [WithDone]).
// h's request holds the whole batch, so that it reads what the events share.
// d is used with p's TTL and AckBudget; q must not be nil. [WithOverflow]
// and the observer of [ContextWithObserver] do not apply.
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
	invalid, processed := -1, 0
	for i, ev := range b.evs {
		key := ev.Key(*a.events)
		if key.Validate() != nil {
			a.c.stats.malformed.Add(1)
			if invalid < 0 {
				invalid = i
			}
			continue
		}
		done, why := a.pushEvent(r, key, d.body.data)
		if why != "" {
			a.c.unavailable(w, why)
			return
		}
		if done {
			processed++
		}
	}
	if invalid >= 0 {
		http.Error(w, fmt.Sprintf("bad request: event %d has an invalid id: %v", invalid,
			b.evs[invalid].Key(*a.events).Validate()), http.StatusBadRequest)
		return
	}
	verdict := "queued"
	if processed == len(b.evs) {
		verdict = string(VerdictDuplicate)
	}
	w.Header().Set(HeaderVerdict, verdict)
	answerEmptyObject(w)
}

// pushEvent pushes the event keyed key of the batch r, whose body is data,
// to a's queue, unless it was processed already (then done is true). It
// returns why it could not, or "" when the event is processed or in the
// queue.
func (a *Async) pushEvent(r *http.Request, key dedupe.Key, data []byte) (done bool, why string) {
	ctx := r.Context()
	marked, err := a.d.Exists(ctx, key)
	switch {
	case err != nil:
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: store failed, asked the platform to retry the batch",
			slog.String("key", key.String()), slog.Any("error", err))
		return false, "message store unavailable"
	case marked:
		return true, ""
	}
	_, _, err = a.c.queue.Push(ctx, a.c.newMessage(r, key, data))
	switch {
	case errors.Is(err, queue.ErrFull):
		a.stats.full.Add(1)
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queue full, asked the platform to retry the batch",
			slog.String("key", key.String()))
		return false, "queue full"
	case err != nil:
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queue failed, asked the platform to retry the batch",
			slog.String("key", key.String()), slog.Any("error", err))
		return false, "queue unavailable"
	}
	return false, ""
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
