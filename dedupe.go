package dedupe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Deduper runs the processing of each message once: it claims the message's
// key before running the caller's function and marks it only after the function
// succeeded, so a failure leaves the message to the platform's retry, and two
// concurrent copies never both run. A Deduper is safe for concurrent use.
type Deduper struct {
	store    Store
	fallback Store
	ttl      time.Duration // 0: the store's default
	lease    time.Duration
	renew    time.Duration // <= 0: no renewal
	retry    time.Duration // how long to stay on the fallback store
	now      func() time.Time
	logger   *slog.Logger
	traceID  func(context.Context) string

	outageUntil atomic.Int64 // Unix nanoseconds; the fallback serves until then
	counters    counters
}

// An Option configures a [Deduper].
type Option func(*Deduper)

// WithTTL sets how long a processed message stays marked. Zero (the default)
// uses the store's default TTL, 24 h unless the store was configured otherwise.
func WithTTL(ttl time.Duration) Option { return func(d *Deduper) { d.ttl = ttl } }

// WithLease sets how long a claim holds a message while it is processed
// (default [DefaultLease]). If the process dies, another copy of the message can
// be processed once the lease runs out. Do renews the lease while fn runs, see
// [WithRenewal].
func WithLease(lease time.Duration) Option {
	return func(d *Deduper) {
		if lease > 0 {
			d.lease = lease
		}
	}
}

// WithRenewal sets how often Do extends the lease of a claim while fn runs.
// The default is a third of the lease; every <= 0 turns renewal off.
func WithRenewal(every time.Duration) Option {
	return func(d *Deduper) {
		d.renew = every
		if every <= 0 {
			d.renew = -1
		}
	}
}

// WithLogger sets the logger for the Deduper's records: each verdict at debug
// level, store errors at warn. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(d *Deduper) {
		if l != nil {
			d.logger = l
		}
	}
}

// WithTraceID sets how the trace id of a log record is found in a context. The
// default reads the id set by [ContextWithTraceID].
func WithTraceID(f func(context.Context) string) Option {
	return func(d *Deduper) {
		if f != nil {
			d.traceID = f
		}
	}
}

// WithFallback makes the Deduper fail over to local, typically a [MemoryStore],
// when the primary store fails: a Claim that errors (other than for an invalid
// key, a closed store or the caller's context) is retried on local, and local
// serves every call for the next retry period (default 5 s, see
// [WithFallbackRetry]) before the primary is tried again. Calls served by local
// are counted in [Stats].Fallbacks.
//
// During an outage, copies of a message that reach different gateway
// instances are no longer deduplicated against each other, and marks made in
// local are not copied to the primary afterwards. Without this option the
// Deduper fails closed: Do returns the store's error without running fn, and
// the platform's retry tries again.
func WithFallback(local Store) Option { return func(d *Deduper) { d.fallback = local } }

// WithFallbackRetry sets how long the fallback store of [WithFallback] serves
// after the primary failed, before the primary is tried again (default 5 s).
func WithFallbackRetry(every time.Duration) Option {
	return func(d *Deduper) {
		if every > 0 {
			d.retry = every
		}
	}
}

// WithClock sets the clock used for the fallback retry period (default
// time.Now). Stores keep their own clocks.
func WithClock(now func() time.Time) Option {
	return func(d *Deduper) {
		if now != nil {
			d.now = now
		}
	}
}

// New returns a Deduper over store. A nil store gets a new [MemoryStore] with
// default settings. The Deduper does not close the store.
func New(store Store, opts ...Option) *Deduper {
	if store == nil {
		store = NewMemoryStore(MemoryConfig{})
	}
	d := &Deduper{
		store:   store,
		lease:   DefaultLease,
		retry:   5 * time.Second,
		now:     time.Now,
		logger:  slog.New(slog.DiscardHandler),
		traceID: TraceID,
	}
	for _, o := range opts {
		o(d)
	}
	if d.renew == 0 {
		d.renew = d.lease / 3
	}
	return d
}

// Store returns the primary store.
func (d *Deduper) Store() Store { return d.store }

// cleanupTimeout bounds the Mark or Release that Do makes after fn returned.
// They run even if the caller's context was cancelled meanwhile: a processed
// message must be marked, and a failed one released.
const cleanupTimeout = 10 * time.Second

// Do runs fn once for the message key identifies:
//   - If the key is marked, Do returns [ErrDuplicate] without running fn.
//   - If another caller holds a claim on it, Do returns [ErrInFlight] without
//     running fn.
//   - Otherwise Do claims it and runs fn with ctx. If fn returns nil, Do marks
//     the key for the Deduper's TTL and returns nil. If fn returns an error,
//     Do releases the claim, so that the platform's retry is processed, and
//     returns fn's error unchanged. If fn panics, Do releases the claim and the
//     panic goes on.
//
// While fn runs, Do renews the claim's lease (see [WithRenewal]). A store error
// while claiming is returned and fn is not run (see [WithFallback]). If fn
// succeeded but the mark failed, Do returns an error wrapping the store's; the
// claim then stays until its lease runs out, so copies arriving meanwhile are
// still refused as in flight.
func (d *Deduper) Do(ctx context.Context, key Key, fn func(context.Context) error) error {
	if err := key.Validate(); err != nil {
		return err
	}
	st, c, err := d.claim(ctx, key)
	if err != nil {
		return err
	}
	switch c.Status {
	case Duplicate:
		d.counters.duplicates.Add(1)
		d.log(ctx, slog.LevelDebug, "dedupe: duplicate", key, st, phaseClaim, nil)
		return ErrDuplicate
	case InFlight:
		d.counters.inFlight.Add(1)
		d.log(ctx, slog.LevelDebug, "dedupe: in flight", key, st, phaseClaim, nil)
		return ErrInFlight
	case Claimed:
	default:
		d.counters.storeErrors.Add(1)
		return fmt.Errorf("dedupe: %s store returned claim status %d", st.Backend(), c.Status)
	}
	return d.run(ctx, st, c, fn)
}

// run runs fn under claim c of store st.
func (d *Deduper) run(ctx context.Context, st Store, c Claim, fn func(context.Context) error) error {
	r := d.renewLease(ctx, st, c)
	done := false
	defer func() {
		if !done { // fn panicked or called runtime.Goexit
			r.stop()
			d.counters.failed.Add(1)
			d.release(ctx, st, c)
		}
	}()
	ferr := fn(ctx)
	done = true
	r.stop()

	if ferr != nil {
		d.counters.failed.Add(1)
		d.release(ctx, st, c)
		return ferr
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := d.timed(phaseMark, func() error { return st.Mark(mctx, c.Key, d.ttl) })
	if err != nil && st != d.fallback && d.fallback != nil {
		d.storeError(ctx, c.Key, st, phaseMark, err)
		d.startOutage()
		st = d.fallback
		err = d.timed(phaseMark, func() error { return st.Mark(mctx, c.Key, d.ttl) })
	}
	if err != nil {
		d.storeError(ctx, c.Key, st, phaseMark, err)
		return fmt.Errorf("dedupe: %s processed but not marked: %w", c.Key, err)
	}
	d.counters.processed.Add(1)
	d.log(ctx, slog.LevelDebug, "dedupe: processed", c.Key, st, phaseMark, nil)
	return nil
}

// claim claims key on the primary store, or on the fallback during an outage.
func (d *Deduper) claim(ctx context.Context, key Key) (Store, Claim, error) {
	st := d.store
	if d.fallback != nil && d.now().UnixNano() < d.outageUntil.Load() {
		st = d.fallback
	}
	claim := func() (c Claim, err error) {
		err = d.timed(phaseClaim, func() error {
			c, err = st.Claim(ctx, key, d.lease)
			return err
		})
		return c, err
	}
	c, err := claim()
	if err != nil && st != d.fallback && d.fallback != nil && isOutage(ctx, err) {
		d.storeError(ctx, key, st, phaseClaim, err)
		d.startOutage()
		st = d.fallback
		c, err = claim()
	}
	if err != nil {
		d.storeError(ctx, key, st, phaseClaim, err)
		return st, c, err
	}
	if st == d.fallback {
		d.counters.fallbacks.Add(1)
		d.log(ctx, slog.LevelDebug, "dedupe: fallback", key, st, phaseClaim, nil)
	}
	return st, c, nil
}

// isOutage reports whether err from a store call means the store is failing,
// rather than the call being invalid or abandoned by its caller.
func isOutage(ctx context.Context, err error) bool {
	return ctx.Err() == nil && !errors.Is(err, ErrInvalidKey) && !errors.Is(err, ErrClosed) &&
		!errors.Is(err, context.Canceled)
}

func (d *Deduper) startOutage() {
	d.outageUntil.Store(d.now().Add(d.retry).UnixNano())
}

// release drops claim c after fn failed.
func (d *Deduper) release(ctx context.Context, st Store, c Claim) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	err := d.timed(phaseRelease, func() error { return st.Release(rctx, c) })
	switch {
	case err == nil:
		d.log(ctx, slog.LevelDebug, "dedupe: released after failure", c.Key, st, phaseRelease, nil)
	case errors.Is(err, ErrNotOwner):
		d.counters.leasesLost.Add(1)
		d.log(ctx, slog.LevelWarn, "dedupe: claim lost before release", c.Key, st, phaseRelease, err)
	default:
		d.storeError(ctx, c.Key, st, phaseRelease, err)
	}
}

// timed runs the store call f and records its duration.
func (d *Deduper) timed(phase int, f func() error) error {
	start := time.Now()
	err := f()
	d.counters.latency[phase].observe(time.Since(start))
	return err
}

func (d *Deduper) storeError(ctx context.Context, key Key, st Store, phase int, err error) {
	d.counters.storeErrors.Add(1)
	d.log(ctx, slog.LevelWarn, "dedupe: store error", key, st, phase, err)
}

func (d *Deduper) log(ctx context.Context, level slog.Level, msg string, key Key, st Store, phase int, err error) {
	if !d.logger.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 5)
	attrs = append(attrs,
		slog.String("key", key.String()),
		slog.String("backend", st.Backend()),
		slog.String("phase", phaseNames[phase]))
	if id := d.traceID(ctx); id != "" {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("error", err))
	}
	d.logger.LogAttrs(ctx, level, msg, attrs...)
}

// leaseRenewal extends a claim's lease from a timer while fn runs. Its timer
// callback holds mu while it calls the store, so stop waits for a renewal in
// progress: no renewal outlives Do.
type leaseRenewal struct {
	mu      sync.Mutex
	stopped bool
	timer   *time.Timer
}

func (d *Deduper) renewLease(ctx context.Context, st Store, c Claim) *leaseRenewal {
	if d.renew <= 0 {
		return nil
	}
	// Renew as long as fn runs, even if the caller's context is cancelled
	// meanwhile (a platform that timed out and hung up): a handler that goes on
	// must keep its claim, or a copy could run beside it.
	ctx = context.WithoutCancel(ctx)
	r := &leaseRenewal{}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = time.AfterFunc(d.renew, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stopped {
			return
		}
		err := d.timed(phaseExtend, func() error {
			ectx, cancel := context.WithTimeout(ctx, min(d.renew, cleanupTimeout))
			defer cancel()
			return st.Extend(ectx, c, d.lease)
		})
		switch {
		case errors.Is(err, ErrNotOwner):
			d.counters.leasesLost.Add(1)
			d.log(ctx, slog.LevelWarn, "dedupe: claim lost while processing", c.Key, st, phaseExtend, err)
			return
		case err != nil:
			d.storeError(ctx, c.Key, st, phaseExtend, err) // try again at the next tick
		}
		r.timer.Reset(d.renew)
	})
	return r
}

func (r *leaseRenewal) stop() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.stopped = true
	r.timer.Stop()
	r.mu.Unlock()
}
