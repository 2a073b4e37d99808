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
// (ExampleEvents). A delivery is authenticated as by [New] (401 before any
// store call); a protocol request (LINE's URL check: no events) is answered
// 200, a body whose events p.Events cannot find 400. Each event is claimed,
// marked or released with its own key by [dedupe.Deduper.DoEach] under p's
// TTL and AckBudget, so h runs for the new events alone: in order, or up to
// n at once given d.With([dedupe.WithConcurrency](n)). r's context is the
// event's ([KeyFrom]); r's header and [Body] are the delivery's, with what
// its events share (LINE's destination). An error or panic of h fails its
// event alone.
//
// An event that cannot be keyed ([platform.Event].Err) costs neither the
// batch nor the others: without a usable id (a Messenger opt-in) it is
// served undeduplicated in its place ([VerdictUndeduplicated]) or refused
// under [WithRefuseUndeduplicated]; with an invalid id it is refused alone.
// Each is counted and logged without its content.
//
// The answer is 200 with {} when every other event was processed now or
// before; otherwise, in this order, 500 if h failed on an event, 503 with
// Retry-After if the store failed, and the [WithInFlight] answer if another
// request still holds an event after the wait. The observer
// ([ContextWithObserver]) learns one [Outcome] per event. WithReplay,
// WithDuplicate and WithExtractError do not apply.
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

	unkeyedFailed int // events served without deduplication whose handler failed
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

// run runs the handler on each event, in order: the keyed ones under the
// Deduper, a run of them at a time, and between them those that cannot be
// keyed, each as [Events] says. It records the outcome of each.
func (b *batch) run() {
	n := len(b.evs)
	keys := make([]dedupe.Key, n)
	why := make([]error, n) // why event i cannot be keyed
	for i, ev := range b.evs {
		keys[i], why[i] = eventKey(b.e.p, ev)
	}
	b.out = make([]Outcome, n)
	for i := 0; i < n; {
		j := i
		for j < n && why[j] == nil {
			j++
		}
		if j > i {
			b.runKeyed(keys[i:j], i)
		}
		if j < n {
			b.out[j] = b.runUnkeyed(j, why[j])
			j++
		}
		i = j
	}
}

// eventKey returns the key of ev on p, or why it has none: ev.Err, or the
// key's own fault.
func eventKey(p platform.Preset, ev platform.Event) (dedupe.Key, error) {
	if ev.Err != nil {
		return dedupe.Key{}, ev.Err
	}
	key := ev.Key(p)
	if err := key.Validate(); err != nil {
		return dedupe.Key{}, err
	}
	return key, nil
}

// runKeyed runs the handler on the events keyed keys, from the batch's
// event first on, under [dedupe.Deduper.DoEach].
func (b *batch) runKeyed(keys []dedupe.Key, first int) {
	ran := make([]bool, len(keys))
	errs := b.e.d.DoEach(b.r.Context(), keys, func(ctx context.Context, i int) error {
		ran[i] = true
		return b.serve(ctx, keys[i], first+i)
	})
	for i, err := range errs {
		// A repeat of a failed event has its error, and ran at its first place.
		ran := ran[i] || errors.Is(err, ErrHandlerFailed)
		o := Outcome{Key: keys[i], Verdict: verdictOf(err, ran)}
		o.Result, o.Err = resultOf(err, ran)
		b.out[first+i] = o
	}
}

// runUnkeyed settles event i, which cannot be keyed because of why: served
// without deduplication when it has no usable id, refused otherwise (see
// [Events]).
func (b *batch) runUnkeyed(i int, why error) Outcome {
	c := b.e.c
	if !errors.Is(why, dedupe.ErrNoMessageID) || malformed(why) {
		c.stats.malformed.Add(1)
		c.eventUnkeyed(b.r.Context(), b.e.p.Name, i, why, "refused", warnEventRefused)
		return Outcome{}
	}
	c.stats.undeduplicated.Add(1)
	if c.refuseNoID {
		c.eventUnkeyed(b.r.Context(), b.e.p.Name, i, why, "refused", warnUndeduplicated)
		return Outcome{}
	}
	c.eventUnkeyed(b.r.Context(), b.e.p.Name, i, why, "served", warnUndeduplicated)
	o := Outcome{Verdict: VerdictUndeduplicated}
	if err := b.serve(b.r.Context(), dedupe.Key{}, i); err != nil {
		o.Err = err
		b.unkeyedFailed++
	}
	return o
}

// eventUnkeyed counts and logs, as a warning of kind, event i of a batch of
// platform that cannot be keyed because of err, and what was done with it
// (how: served or refused). The record holds no id: err's text names the
// event and the field, never a value.
func (c *config) eventUnkeyed(ctx context.Context, platform string, i int, err error, how string, kind int) {
	c.warn(ctx, kind, "dedupe: dedupehttp: event of a batch without a usable key, not deduplicated",
		slog.String("outcome", how), slog.String("platform", platform), slog.Int("event", i), slog.Any("error", err))
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

// serve runs the handler on event i, whose key is key (zero for an event
// served without deduplication), with ctx, recovering a panic. Its error
// wraps ErrHandlerFailed.
func (b *batch) serve(ctx context.Context, key dedupe.Key, i int) (err error) {
	verdict := VerdictNew
	if key == (dedupe.Key{}) {
		verdict = VerdictUndeduplicated
	}
	ev := &delivery{Context: ctx, key: key, verdict: verdict}
	ev.body.set(b.d.body.data) // a reader of its own, for handlers run at once
	r := b.r.WithContext(ev)
	r.Body = &ev.body
	name := slog.String("key", key.String())
	if verdict == VerdictUndeduplicated {
		name = slog.Int("event", i)
	}
	defer func() {
		if p := recover(); p != nil {
			b.e.c.log(ctx, slog.LevelError, "dedupe: dedupehttp: event handler panicked",
				name, slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("%w: panic: %v", ErrHandlerFailed, p)
		}
		if err != nil {
			b.e.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: event handler failed; its claim was released, so that the platform's redelivery runs it",
				name, slog.Any("error", err))
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
	failed, storeErr, inFlight, dup := b.unkeyedFailed, 0, 0, 0
	first := 0 // the first event in flight
	for i, o := range b.out {
		switch o.Result {
		case resultFailed, resultAbandoned:
			failed++
		case resultStoreError:
			storeErr++
		case resultInFlight:
			if inFlight++; inFlight == 1 {
				first = i
			}
		case resultDuplicate:
			dup++
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
		b.d.key, b.d.verdict = b.out[first].Key, VerdictInFlight
		w.Header().Set(HeaderVerdict, string(VerdictInFlight))
		c.inFlight.ServeHTTP(w, b.r)
	default:
		if dup == len(b.out) && dup > 0 {
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
