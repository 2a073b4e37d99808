package dedupe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gatewaykit/dedupe/internal/wait"
)

// Deduper runs each message's processing once: it claims the key before
// running the caller's function and marks it only after the function succeeded,
// so a failure is left to the platform's retry and two concurrent copies never
// both run. It is safe for concurrent use. Work its store failed to take at
// first ([WithBacklog]) is done by one goroutine, which ends with that work.
type Deduper struct {
	settings
	fb     *fallback // nil without WithFallback
	shared *shared
}

// shared is what a Deduper and those made from it by [Deduper.With] share.
type shared struct {
	store    Store
	counters counters
	backlog  backlog
	pending  pendingMarks
}

// settings are what options set.
type settings struct {
	ttl      time.Duration // <= 0: the store's default
	lease    time.Duration
	renew    time.Duration // < 0: no renewal; 0: a third of the lease
	wait     time.Duration // <= 0: no waiting
	local    Store         // the fallback store, or nil
	retry    time.Duration // how long the fallback serves alone after failures
	queue    int           // bound of the backlog
	now      func() time.Time
	logger   *slog.Logger
	traceID  func(context.Context) string
	fbConfig int // bumped by each fallback option, so With knows to rebuild
}

// An Option configures a [Deduper], in [New] or [Deduper.With].
type Option func(*settings)

// WithTTL sets how long a processed message stays marked (default 0: the
// store's default TTL).
func WithTTL(ttl time.Duration) Option { return func(s *settings) { s.ttl = ttl } }

// WithLease sets how long a claim holds a message while it is processed
// (default [DefaultLease]; zero or less keeps it): if the process dies, another
// copy can be processed once the lease runs out.
func WithLease(lease time.Duration) Option {
	return func(s *settings) {
		if lease > 0 {
			s.lease = lease
		}
	}
}

// WithRenewal sets how often Do extends a claim's lease while fn runs: by
// default a third of the lease; zero or less turns renewal off. An interval
// over half the lease could let it lapse, so it is clamped to a third.
func WithRenewal(every time.Duration) Option {
	return func(s *settings) {
		s.renew = every
		if every <= 0 {
			s.renew = -1
		}
	}
}

// WithWait makes Do wait up to max when another caller holds the message's
// claim, asking the store again with a backoff from 5 ms to 250 ms, until the
// owner marks it (Do returns [ErrDuplicate]), releases it or its lease runs out
// (Do runs fn, after the owner, never beside it), or max or ctx ends (Do returns
// [ErrInFlight]). Zero or less (the default) does not wait. An HTTP gateway uses
// it to answer a copy with the first copy's outcome.
func WithWait(max time.Duration) Option { return func(s *settings) { s.wait = max } }

// WithLogger sets the logger of verdicts (debug) and store errors (warn).
func WithLogger(l *slog.Logger) Option {
	return func(s *settings) {
		if l != nil {
			s.logger = l
		}
	}
}

// WithTraceID sets how a log record's trace id is found in a context (default
// [TraceID]).
func WithTraceID(f func(context.Context) string) Option {
	return func(s *settings) {
		if f != nil {
			s.traceID = f
		}
	}
}

// WithClock sets the clock of the fallback and the backlog (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(s *settings) {
		if now != nil {
			s.now = now
			s.fbConfig++
		}
	}
}

// New returns a Deduper over store, which it does not close; a nil store gets
// a new [MemoryStore].
func New(store Store, opts ...Option) *Deduper {
	if store == nil {
		store = NewMemoryStore(MemoryConfig{})
	}
	d := &Deduper{
		settings: settings{
			lease:   DefaultLease,
			retry:   defaultFallbackRetry,
			queue:   defaultBacklog,
			now:     time.Now,
			logger:  slog.New(slog.DiscardHandler),
			traceID: TraceID,
		},
		shared: &shared{store: store},
	}
	d.apply(opts)
	d.fb = d.newFallback()
	return d
}

// With returns a Deduper sharing d's store, counters and backlog, with opts
// applied over d's options, so that one Deduper serves several platforms each
// with its own TTL or wait. A fallback option gives it a fallback of its own.
func (d *Deduper) With(opts ...Option) *Deduper {
	n := &Deduper{settings: d.settings, fb: d.fb, shared: d.shared}
	n.apply(opts)
	if n.fbConfig != d.fbConfig {
		n.fb = n.newFallback()
	}
	return n
}

// apply applies opts and settles the renewal interval.
func (d *Deduper) apply(opts []Option) {
	for _, o := range opts {
		o(&d.settings)
	}
	if d.renew == 0 || d.renew > d.lease/2 {
		d.renew = d.lease / 3
	}
}

// Store returns the primary store.
func (d *Deduper) Store() Store { return d.shared.store }

// Close stops the background work shared with [Deduper.With] and drops what
// is queued ([Stats].Dropped); it does not close the stores. It is idempotent.
func (d *Deduper) Close() error {
	d.shared.backlog.close(&d.shared.counters)
	return nil
}

// Flush waits until the work queued for the primary store ([WithBacklog]) is
// done, or ctx is; call it before Close.
func (d *Deduper) Flush(ctx context.Context) error {
	return d.shared.backlog.flush(ctx)
}

// cleanupTimeout bounds the Mark (and its retries) or Release that Do makes
// after fn returned.
// They run even if the caller's context was cancelled meanwhile: a processed
// message must be marked, and a failed one released.
const cleanupTimeout = 10 * time.Second

// abandonTimeout bounds the Release of a claim whose Claim call failed.
const abandonTimeout = time.Second

// Do runs fn once for the message key identifies:
//   - If the key is marked, Do returns [ErrDuplicate] without running fn.
//   - If another caller holds its claim, Do returns [ErrInFlight] without
//     running fn, or first waits for that caller (see [WithWait]).
//   - Otherwise Do claims it and runs fn with ctx. If fn returns nil, Do marks
//     the key and returns nil. If fn returns an error or panics, Do releases
//     the claim, so the platform's retry is processed, and returns the error
//     unchanged (or lets the panic go on).
//
// Do renews the lease while fn runs ([WithRenewal]). A store error while
// claiming is returned without running fn ([WithFallback] changes that); if the
// store may have taken the claim all the same (a lost reply, a deadline passed
// mid-call), Do asks again with the same token while ctx allows, or else
// releases it by its token, so a failed call strands no claim. A mark that
// fails after fn succeeded is retried for 10 s, then queued ([Deduper.Flush])
// and Do returns the store's error; copies meet the claim, or ErrDuplicate.
func (d *Deduper) Do(ctx context.Context, key Key, fn func(context.Context) error) error {
	if err := key.Validate(); err != nil {
		return err
	}
	cs := &d.shared.counters
	if d.shared.pending.has(key) { // processed here; its mark is queued
		cs.duplicates.Add(1)
		d.log(ctx, slog.LevelDebug, "dedupe: duplicate, mark queued", key, d.Store().Backend(), phaseClaim, nil)
		return ErrDuplicate
	}
	c := NewClaim(key)
	h, status, err := d.claim(ctx, c)
	if err == nil && status == InFlight && d.wait > 0 {
		h, status, err = d.waitForOwner(ctx, c)
	}
	if err != nil {
		return err
	}
	switch status {
	case Duplicate:
		cs.duplicates.Add(1)
		d.log(ctx, slog.LevelDebug, "dedupe: duplicate", key, h.name(d), phaseClaim, nil, h.layerAttr()...)
		return ErrDuplicate
	case InFlight:
		cs.inFlight.Add(1)
		d.log(ctx, slog.LevelDebug, "dedupe: in flight", key, h.name(d), phaseClaim, nil, h.layerAttr()...)
		return ErrInFlight
	case Claimed:
	default:
		cs.storeErrors.Add(1)
		return fmt.Errorf("dedupe: %s store returned claim status %d", d.Store().Backend(), status)
	}
	return d.run(ctx, h, c, fn)
}

// holding says which stores hold a claim of Do, and which layer of a
// [LayeredStore] decided.
type holding struct {
	primary, local bool
	layer          string
}

// stores returns the stores h names.
func (h holding) stores(d *Deduper) []Store {
	var out []Store
	if h.local {
		out = append(out, d.fb.local)
	}
	if h.primary {
		out = append(out, d.shared.store)
	}
	return out
}

// layerAttr returns the log attribute naming the layer that decided, if any.
func (h holding) layerAttr() []slog.Attr {
	if h.layer == "" {
		return nil
	}
	return []slog.Attr{slog.String("layer", h.layer)}
}

// name returns the backend that decided, for logs.
func (h holding) name(d *Deduper) string {
	if !h.primary && h.local {
		return d.fb.local.Backend()
	}
	return d.shared.store.Backend()
}

// claim claims c on the primary store, and on the fallback first if there is
// one. On success the claim is held by the stores the result names; on
// another status or an error, by none.
func (d *Deduper) claim(ctx context.Context, c Claim) (holding, Status, error) {
	if d.fb != nil {
		return d.claimWithFallback(ctx, c)
	}
	st, layer, err := d.claimOn(ctx, d.shared.store, c)
	if err != nil {
		d.storeError(ctx, c.Key, d.shared.store, phaseClaim, err)
	}
	return holding{primary: st == Claimed, layer: layer}, st, err
}

// claimOn claims c on st. If the call fails in a way that leaves it unknown
// whether st took the claim, it asks once more with the same token while ctx
// lives, and otherwise releases the claim by its token.
// The layer is the name of the layer of a [LayeredStore] that decided, or "".
func (d *Deduper) claimOn(ctx context.Context, st Store, c Claim) (Status, string, error) {
	status, layer, err := d.storeClaim(ctx, st, c)
	if err == nil || !ambiguous(err) {
		return status, layer, err
	}
	d.shared.counters.ambiguous.Add(1)
	if ctx.Err() == nil && !isContextErr(err) {
		if status, layer, err2 := d.storeClaim(ctx, st, c); err2 == nil {
			return status, layer, nil
		}
	}
	d.abandon(ctx, st, c)
	return 0, layer, err
}

func (d *Deduper) storeClaim(ctx context.Context, st Store, c Claim) (status Status, layer string, err error) {
	err = d.timed(phaseClaim, func() error {
		if l, ok := st.(*LayeredStore); ok {
			var i int
			status, i, err = l.claim(ctx, c, d.lease)
			layer = l.names[i]
			return err
		}
		status, err = st.Claim(ctx, c, d.lease)
		return err
	})
	return status, layer, err
}

// ambiguous reports whether a failed Claim may have been written all the same.
// Invalid keys, a full store and a closed store are refused before anything is
// written.
func ambiguous(err error) bool {
	return !errors.Is(err, ErrInvalidKey) && !errors.Is(err, ErrStoreFull) && !errors.Is(err, ErrClosed)
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// abandon releases c on st after a Claim that failed ambiguously, with a
// fresh short context. If that fails too, the backlog tries again until the
// lease would have run out anyway.
func (d *Deduper) abandon(ctx context.Context, st Store, c Claim) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abandonTimeout)
	err := st.Release(rctx, c)
	cancel()
	if err == nil || errors.Is(err, ErrNotOwner) || !ambiguous(err) {
		return
	}
	d.storeError(ctx, c.Key, st, phaseRelease, err)
	d.shared.backlog.add(d, job{
		until: d.now().Add(d.lease),
		do: func(ctx context.Context) error {
			if err := st.Release(ctx, c); err != nil && !errors.Is(err, ErrNotOwner) {
				return err
			}
			return nil
		},
	})
}

// waitForOwner asks for c again, with a backoff, while another caller holds
// its key, for at most the Deduper's wait.
func (d *Deduper) waitForOwner(ctx context.Context, c Claim) (holding, Status, error) {
	cs := &d.shared.counters
	cs.waits.Add(1)
	wctx, cancel := context.WithTimeout(ctx, d.wait)
	defer cancel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for backoff := minWaitBackoff; ; backoff = min(2*backoff, maxWaitBackoff) {
		timer.Reset(backoff)
		select {
		case <-wctx.Done():
			cs.waitsTimedOut.Add(1)
			return holding{}, InFlight, nil
		case <-timer.C:
		}
		h, status, err := d.claim(wctx, c)
		switch {
		case err != nil && wctx.Err() != nil && ctx.Err() == nil:
			cs.waitsTimedOut.Add(1) // the wait ended during the call
			return holding{}, InFlight, nil
		case err != nil:
			return h, status, err
		case status == Duplicate:
			cs.waitsDuplicate.Add(1)
			return h, status, nil
		case status == Claimed:
			cs.waitsClaimed.Add(1)
			return h, status, nil
		}
	}
}

// Bounds of the backoff between the claims of a wait.
const (
	minWaitBackoff = 5 * time.Millisecond
	maxWaitBackoff = 250 * time.Millisecond
)

// run runs fn under claim c, held by the stores h names.
func (d *Deduper) run(ctx context.Context, h holding, c Claim, fn func(context.Context) error) error {
	r := d.renewLease(ctx, h, c)
	done := false
	defer func() {
		if !done { // fn panicked or called runtime.Goexit
			r.stop()
			d.shared.counters.failed.Add(1)
			d.release(ctx, h, c)
		}
	}()
	ferr := fn(ctx)
	done = true
	r.stop()

	if ferr != nil {
		d.shared.counters.failed.Add(1)
		d.release(ctx, h, c)
		return ferr
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if d.fb != nil {
		d.markWithFallback(mctx, h, c.Key)
	} else if err := d.markRetried(mctx, c.Key); err != nil {
		if ambiguous(err) {
			// The claim holds copies off for its lease; the backlog writes the
			// mark once the store answers, so none runs after the lease either.
			d.deferMark(c.Key)
		}
		return fmt.Errorf("dedupe: %s processed but not marked: %w", c.Key, err)
	}
	d.shared.counters.processed.Add(1)
	d.log(ctx, slog.LevelDebug, "dedupe: processed", c.Key, h.name(d), phaseMark, nil, h.layerAttr()...)
	return nil
}

// markOn marks key on st for the Deduper's TTL.
func (d *Deduper) markOn(ctx context.Context, st Store, key Key) error {
	err := d.timed(phaseMark, func() error { return st.Mark(ctx, key, d.ttl) })
	if err != nil {
		d.storeError(ctx, key, st, phaseMark, err)
	}
	return err
}

// markRetried marks key on the primary store, trying again with a backoff
// while the store fails in a way a retry may cure, until ctx is done: the mark
// is what acknowledges a processed message, so it is worth the wait.
func (d *Deduper) markRetried(ctx context.Context, key Key) error {
	for backoff := minWaitBackoff; ; backoff = min(2*backoff, maxWaitBackoff) {
		err := d.markOn(ctx, d.shared.store, key)
		if err == nil || !ambiguous(err) || wait.Sleep(ctx, backoff) != nil {
			return err
		}
	}
}

// release drops claim c from the stores h names after fn failed.
func (d *Deduper) release(ctx context.Context, h holding, c Claim) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	for _, st := range h.stores(d) {
		err := d.timed(phaseRelease, func() error { return st.Release(rctx, c) })
		switch {
		case err == nil:
			d.log(ctx, slog.LevelDebug, "dedupe: released after failure", c.Key, st.Backend(), phaseRelease, nil)
		case errors.Is(err, ErrNotOwner):
			d.shared.counters.leasesLost.Add(1)
			d.log(ctx, slog.LevelWarn, "dedupe: claim lost before release", c.Key, st.Backend(), phaseRelease, err)
		default:
			d.storeError(ctx, c.Key, st, phaseRelease, err)
		}
	}
}

// timed runs the store call f and records its duration.
func (d *Deduper) timed(phase int, f func() error) error {
	start := time.Now()
	err := f()
	d.shared.counters.latency[phase].observe(time.Since(start))
	return err
}

func (d *Deduper) storeError(ctx context.Context, key Key, st Store, phase int, err error) {
	d.shared.counters.storeErrors.Add(1)
	d.log(ctx, slog.LevelWarn, "dedupe: store error", key, st.Backend(), phase, err)
}

func (d *Deduper) log(ctx context.Context, level slog.Level, msg string, key Key, backend string, phase int, err error, extra ...slog.Attr) {
	if !d.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 5+len(extra))
	attrs = append(attrs,
		slog.String("key", key.String()),
		slog.String("backend", backend),
		slog.String("phase", phaseNames[phase]))
	if id := d.traceID(ctx); id != "" {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	attrs = append(attrs, extra...)
	d.logger.LogAttrs(ctx, level, msg, attrs...)
}
