package dedupehttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
)

// NewAsyncEvents returns an [Async] for a platform that batches its events
// (p.Events: [platform.LINE], [platform.Meta], [platform.Matrix]): [Events]
// for handlers slower than the platform's timeout. A batch is authenticated
// as by [New] (a forgery gets 401 and touches neither the store nor q);
// then each event not processed yet ([dedupe.Deduper.Exists]) is pushed to
// q under its own key, and the batch is answered 200 {} only once every
// event is in q or processed. A store or q failure, or a full q, is answered 503
// with Retry-After (the events pushed stay in q). [WithWorkers] workers run
// h under [dedupe.Deduper.Do] with each event's key, as [WithQueue] says:
// once per event whatever q hands out twice, an error or panic failing that
// event's attempt alone ([WithMaxAttempts], [WithDone]).
//
// A message holds its event's part of the batch (the batch's JSON without
// the other events, with what they share), not the whole batch; messages of
// earlier versions are served as before. The signature headers are queued
// as received. An event that cannot be keyed is handled as under [Events];
// one without a usable id is pushed under a made key ("unkeyed-…"), so it
// runs once per delivery of the batch. d is used with p's TTL and
// AckBudget; q must not be nil. [WithOverflow] and the observer of
// [ContextWithObserver] do not apply.
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
	parts := newEventParts(d.body.data, b.evs)
	queued, processed := 0, 0
	for i, ev := range b.evs {
		key, err := eventKey(*a.events, ev)
		if err != nil {
			if key = a.unkeyed(r, parts, i, err); key == (dedupe.Key{}) {
				continue // refused alone
			}
		}
		done, why := a.pushEvent(r, key, parts.part(i))
		if why != "" {
			a.c.unavailable(w, why)
			return
		}
		if done {
			processed++
		} else {
			queued++
		}
	}
	switch {
	case queued > 0:
		w.Header().Set(HeaderVerdict, "queued")
	case processed > 0:
		w.Header().Set(HeaderVerdict, string(VerdictDuplicate))
	}
	answerEmptyObject(w)
}

// unkeyedPrefix begins the message id of the key made for an event without
// a usable id of its own.
const unkeyedPrefix = "unkeyed-"

// unkeyed settles event i of the batch r, which cannot be keyed because of
// why: it returns the key made to queue it under (see [NewAsyncEvents]), or
// the zero key when it is refused alone. Either way it is counted and
// logged.
func (a *Async) unkeyed(r *http.Request, parts *eventParts, i int, why error) dedupe.Key {
	c, name := a.c, a.events.Name
	switch {
	case !errors.Is(why, dedupe.ErrNoMessageID) || malformed(why):
		c.stats.malformed.Add(1)
		c.eventUnkeyed(r.Context(), name, i, why, "refused", warnEventRefused)
	case c.refuseNoID || !parts.ok:
		// Without parts the event could not be told from the batch's
		// others that have no id either.
		c.stats.undeduplicated.Add(1)
		c.eventUnkeyed(r.Context(), name, i, why, "refused", warnUndeduplicated)
	default:
		c.stats.undeduplicated.Add(1)
		c.eventUnkeyed(r.Context(), name, i, why, "queued", warnUndeduplicated)
		return dedupe.Key{Channel: name, MessageID: unkeyedPrefix + newMessageID()}
	}
	return dedupe.Key{}
}

// pushEvent pushes the event keyed key of the batch r, whose part is data,
// to a's queue, unless it was processed already (then done is true). It
// returns why it could not, or "" when the event is processed or in the
// queue.
func (a *Async) pushEvent(r *http.Request, key dedupe.Key, data []byte) (done bool, why string) {
	ctx := r.Context()
	var marked bool
	var err error
	if !strings.HasPrefix(key.MessageID, unkeyedPrefix) { // a made key was never marked
		marked, err = a.d.Exists(ctx, key)
	}
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
// its event in the message's part of the batch (or, queued by an earlier
// version, in the whole batch) and runs the per-event handler on it.
type queuedEvent struct {
	p platform.Preset
	h func(*http.Request, platform.Event) error
}

// ServeHTTP runs the handler on the event of r whose key is r's, or on the
// one event without a usable id of a part queued under a made key, and
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
	ev, found := e.find(evs, key)
	if !found {
		http.Error(w, "dedupe: dedupehttp: queued event "+key.String()+" not in its batch", http.StatusInternalServerError)
		return
	}
	if ev.Err != nil || ev.Key(e.p) != key {
		if d, ok := r.Context().Value(deliveryKey{}).(*delivery); ok {
			d.key, d.verdict = dedupe.Key{}, VerdictUndeduplicated
		}
	}
	if err := e.h(r, ev); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}

// find returns the event of evs keyed key; or, for a key made for an event
// without a usable id, the one such event of its part.
func (e queuedEvent) find(evs []platform.Event, key dedupe.Key) (platform.Event, bool) {
	for _, ev := range evs {
		if ev.Err == nil && ev.Key(e.p) == key {
			return ev, true
		}
	}
	if !strings.HasPrefix(key.MessageID, unkeyedPrefix) {
		return platform.Event{}, false
	}
	var found []platform.Event
	for _, ev := range evs {
		if _, err := eventKey(e.p, ev); err != nil {
			found = append(found, ev)
		}
	}
	if len(found) != 1 {
		return platform.Event{}, false
	}
	return found[0], true
}
