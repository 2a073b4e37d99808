package dedupehttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// Events returns a [Handler] for a platform that delivers several events in
// one request (p.Events: [platform.LINE], [platform.Meta], [platform.Matrix]),
// which runs h once for each new event however often the batch comes again
// (ExampleEvents). A handler per event, not per batch, because a platform redelivers a batch
// whose answer was not 2xx, with events processed beside those that failed,
// and only an outcome per event lets the redelivery run just the rest. A
// delivery is authenticated as by [New] (401 before any store call); a
// protocol request (LINE's URL check: no events) is answered 200, a body
// whose events p.Events cannot find 400. Each event is then claimed, marked
// or released with its own key ([platform.Event].Key) by
// [dedupe.Deduper.DoEach] under p's TTL and AckBudget, so h runs for the new
// events alone: in order, or up to n at once given
// d.With([dedupe.WithConcurrency](n)). r's context is the event's
// ([KeyFrom]; cancelled if its claim is lost); r's header and [Body] are the
// delivery's, with what its events share (LINE's destination, WhatsApp's
// metadata). An error or panic of h fails its event alone.
//
// The answer is 200 with {} only when every event was processed now or
// before; otherwise, in this order, 500 if h failed on an event, 503 with
// Retry-After if the store failed, the [WithInFlight] answer if another
// request still holds an event after the wait, and 400 if an event's id is
// invalid (refused alone; counted in [Stats].Malformed). The observer
// ([ContextWithObserver]) learns one [Outcome] per event. WithReplay and
// WithDuplicate do not apply; a preset without Events gets 500.
func Events(d *dedupe.Deduper, p platform.Preset, h func(r *http.Request, ev platform.Event) error, opts ...Option) *Handler {
	c := newConfig(append([]Option{WithVerify(p)}, opts...))
	if p.Events == nil {
		c.log(context.Background(), slog.LevelError, "dedupe: dedupehttp: the preset has no Events func: every delivery will be answered 500",
			slog.String("platform", p.Name))
	}
	return &Handler{h: &eventsHandler{d: presetDeduper(d, p), p: p, h: h, c: c}, c: c, name: p.Name}
}

// eventsHandler is the http.Handler of Events.
type eventsHandler struct {
	d *dedupe.Deduper
	p platform.Preset
	h func(*http.Request, platform.Event) error
	c *config
}

// ServeHTTP authenticates r, runs the handler on each of its new events and
// answers, as [Events] says.
func (e *eventsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	observe := observerOf(r.Context())
	r, d := e.c.receive(w, r)
	if d == nil {
		if observe != nil {
			observe(Outcome{})
		}
		return
	}
	b := &batch{e: e, r: r, d: d}
	if b.events(w) {
		b.run()
		b.answer(w)
	}
	if observe == nil {
		return
	}
	if len(b.out) == 0 {
		observe(d.outcome())
	}
	for _, o := range b.out {
		observe(o)
	}
}

// batch is one delivery of several events.
type batch struct {
	e   *eventsHandler
	r   *http.Request // its context is d
	d   *delivery
	evs []platform.Event
	out []Outcome // one per event
}

// events finds the events of the delivery. It answers a delivery without
// usable events itself, and then returns false.
func (b *batch) events(w http.ResponseWriter) bool {
	c := b.e.c
	if b.e.p.Events == nil {
		http.Error(w, "dedupe: dedupehttp: preset "+b.e.p.Name+" has no Events func", http.StatusInternalServerError)
		return false
	}
	evs, err := b.e.p.Events(b.d.body.data, b.r.Header)
	switch {
	case errors.Is(err, platform.ErrNotAMessage):
		c.stats.protocol.Add(1)
		b.d.verdict = VerdictProtocol
		c.debug(b.r.Context(), "dedupe: dedupehttp: protocol request answered without deduplication", slog.Any("error", err))
		w.Header().Set(HeaderVerdict, string(VerdictProtocol))
		answerEmptyObject(w)
		return false
	case err != nil:
		c.stats.malformed.Add(1)
		c.debug(b.r.Context(), "dedupe: dedupehttp: no events, refused", slog.Any("error", err))
		http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
		return false
	}
	b.evs = evs
	return true
}

// run runs the handler on each new event under the Deduper, and records
// the outcome of each.
func (b *batch) run() {
	keys := make([]dedupe.Key, len(b.evs))
	for i, ev := range b.evs {
		keys[i] = ev.Key(b.e.p)
	}
	ran := make([]bool, len(b.evs))
	errs := b.e.d.DoEach(b.r.Context(), keys, func(ctx context.Context, i int) error {
		ran[i] = true
		return b.serve(ctx, keys[i], i)
	})
	b.out = make([]Outcome, len(b.evs))
	for i, err := range errs {
		// A repeat of a failed event has its error, and ran at its first place.
		ran := ran[i] || errors.Is(err, ErrHandlerFailed)
		o := Outcome{Key: keys[i], Verdict: verdictOf(err, ran)}
		o.Result, o.Err = resultOf(err, ran)
		if o.Result == "" { // an invalid id: no key, no record
			o.Key = dedupe.Key{}
			b.e.c.stats.malformed.Add(1)
		}
		b.out[i] = o
	}
}

// verdictOf returns the verdict of an event whose Do returned err, having
// run the handler or not.
func verdictOf(err error, ran bool) Verdict {
	switch {
	case ran:
		return VerdictNew
	case errors.Is(err, dedupe.ErrDuplicate):
		return VerdictDuplicate
	case errors.Is(err, dedupe.ErrInFlight):
		return VerdictInFlight
	}
	return ""
}

// serve runs the handler on event i, whose key is key, with ctx, recovering
// a panic. Its error wraps ErrHandlerFailed.
func (b *batch) serve(ctx context.Context, key dedupe.Key, i int) (err error) {
	ev := &delivery{Context: ctx, key: key, verdict: VerdictNew}
	ev.body.set(b.d.body.data) // a reader of its own, for handlers run at once
	r := b.r.WithContext(ev)
	r.Body = &ev.body
	defer func() {
		if p := recover(); p != nil {
			b.e.c.log(ctx, slog.LevelError, "dedupe: dedupehttp: event handler panicked",
				slog.String("key", key.String()), slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("%w: panic: %v", ErrHandlerFailed, p)
		}
		if err != nil {
			b.e.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: event handler failed; its claim was released, so that the platform's redelivery runs it",
				slog.String("key", key.String()), slog.Any("error", err))
		}
	}()
	if err := b.e.h(r, b.evs[i]); err != nil {
		return fmt.Errorf("%w: %w", ErrHandlerFailed, err)
	}
	return nil
}

// answer answers the delivery once its events are settled, as [Events]
// says.
func (b *batch) answer(w http.ResponseWriter) {
	var failed, storeErr, inFlight, invalid, fresh int
	var first [2]int // the first event in flight, and the first invalid one
	for i, o := range b.out {
		switch o.Result {
		case resultFailed, resultAbandoned:
			failed++
		case resultStoreError:
			storeErr++
		case resultInFlight:
			if inFlight++; inFlight == 1 {
				first[0] = i
			}
		case "":
			if invalid++; invalid == 1 {
				first[1] = i
			}
		case resultProcessed:
			fresh++
		}
	}
	c := b.e.c
	switch {
	case failed > 0:
		w.Header().Set(HeaderVerdict, resultFailed)
		http.Error(w, fmt.Sprintf("%d of %d events failed, retry later", failed, len(b.out)), http.StatusInternalServerError)
	case storeErr > 0:
		c.unavailable(w, "message store unavailable")
	case inFlight > 0:
		b.d.key, b.d.verdict = b.out[first[0]].Key, VerdictInFlight
		w.Header().Set(HeaderVerdict, string(VerdictInFlight))
		c.inFlight.ServeHTTP(w, b.r)
	case invalid > 0:
		http.Error(w, fmt.Sprintf("bad request: %d of %d events have an invalid id, the first is event %d: %v",
			invalid, len(b.out), first[1], b.evs[first[1]].Key(b.e.p).Validate()), http.StatusBadRequest)
	default:
		if fresh == 0 && len(b.out) > 0 {
			w.Header().Set(HeaderVerdict, string(VerdictDuplicate))
		}
		answerEmptyObject(w)
	}
}

// answerEmptyObject answers 200 with the empty JSON object, which a Matrix
// homeserver expects of a transaction and the others ignore.
func answerEmptyObject(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte("{}"))
}
