package dedupe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Defaults of the fallback options.
const (
	defaultFallbackRetry = 5 * time.Second
	defaultBacklog       = 10000
	// breakerFailures is how many primary failures in a row make the fallback
	// serve alone for the retry period.
	breakerFailures = 3
)

// WithFallback makes the Deduper keep working on local, typically a
// [MemoryStore], when the primary store fails. Without it the Deduper fails
// closed: Do returns the store's error and the platform retries.
//
// Claims are then taken on local first and on the primary second, so two copies
// in this process never run at once whichever store answered. A claim the
// primary fails to take (other than an invalid key, a full or closed store or
// the caller's context) is served by local alone ([Stats].Fallbacks). After three
// failures in a row local serves alone for [WithFallbackRetry]'s period; then one
// call probes the primary before the others return to it. Marks go to local
// too; one the primary did not take is queued ([WithBacklog]) and written once
// it answers, so other instances recognise the message after the outage.
func WithFallback(local Store) Option {
	return func(s *settings) {
		s.local = local
		s.fbConfig++
	}
}

// WithFallbackRetry sets how long the fallback of [WithFallback] serves alone
// after three primary failures in a row, before a call probes the primary
// (default 5 s; zero or less keeps it).
func WithFallbackRetry(every time.Duration) Option {
	return func(s *settings) {
		if every > 0 {
			s.retry = every
			s.fbConfig++
		}
	}
}

// WithBacklog bounds the queue of work the primary store failed to take, done
// later by one goroutine: marks made while the fallback served, and releases of
// claims whose Claim failed ambiguously (default 10000; zero or less keeps it).
// Work beyond it is dropped and counted in [Stats].Dropped.
func WithBacklog(n int) Option {
	return func(s *settings) {
		if n > 0 {
			s.queue = n
		}
	}
}

// fallback is the state of WithFallback: a local store and a circuit breaker
// on the primary.
type fallback struct {
	local Store
	retry time.Duration
	now   func() time.Time

	mu        sync.Mutex
	failures  int       // primary failures in a row
	openUntil time.Time // local serves alone until then
	probing   bool      // a call is probing the primary
}

func (d *Deduper) newFallback() *fallback {
	if d.local == nil {
		return nil
	}
	return &fallback{local: d.local, retry: d.retry, now: d.now}
}

// usePrimary reports whether a call should try the primary store. While the
// breaker is open it answers false; once the retry period is over it answers
// true to one call at a time, the probe, until the primary answers again.
func (f *fallback) usePrimary() (probe bool, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.openUntil.IsZero() {
		return false, true
	}
	if f.probing || f.now().Before(f.openUntil) {
		return false, false
	}
	f.probing = true
	return true, true
}

// primaryDone records the outcome of a call that tried the primary: ok false
// for an outage. A probe that ended otherwise (the caller gave up) leaves the
// breaker as it was, ready for another probe.
func (f *fallback) primaryDone(probe, ok, outage bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if probe {
		f.probing = false
	}
	switch {
	case ok:
		f.failures = 0
		f.openUntil = time.Time{}
	case outage:
		f.failures++
		if probe || f.failures >= breakerFailures {
			f.openUntil = f.now().Add(f.retry)
		}
	}
}

// claimWithFallback claims c on the fallback store, then on the primary. If
// the primary fails, the claim is served by the fallback alone.
func (d *Deduper) claimWithFallback(ctx context.Context, c Claim) (holding, Status, error) {
	// A front layer of a layered primary answers a duplicate before any
	// round trip, as it does without a fallback.
	if l, ok := d.shared.store.(*LayeredStore); ok {
		if i, dup, err := l.frontMark(ctx, c.Key); dup && err == nil {
			return holding{layer: l.names[i]}, Duplicate, nil
		}
	}
	status, _, err := d.claimOn(ctx, d.fb.local, c)
	if err != nil {
		d.storeError(ctx, c.Key, d.fb.local, phaseClaim, err)
		return holding{}, 0, err
	}
	if status != Claimed {
		return holding{}, status, nil
	}
	probe, try := d.fb.usePrimary()
	if !try {
		d.servedLocally(ctx, c.Key)
		return holding{local: true}, Claimed, nil
	}
	status, layer, err := d.claimOn(ctx, d.shared.store, c)
	outage := err != nil && isOutage(ctx, err)
	d.fb.primaryDone(probe, err == nil, outage)
	switch {
	case err == nil && status == Claimed:
		return holding{primary: true, local: true, layer: layer}, Claimed, nil
	case outage:
		d.storeError(ctx, c.Key, d.shared.store, phaseClaim, err)
		d.servedLocally(ctx, c.Key)
		return holding{local: true}, Claimed, nil
	}
	// The primary refused (duplicate, in flight) or the call was invalid or
	// abandoned: the fallback's claim goes too.
	d.release(ctx, holding{local: true}, c)
	if err != nil {
		d.storeError(ctx, c.Key, d.shared.store, phaseClaim, err)
	}
	return holding{layer: layer}, status, err
}

func (d *Deduper) servedLocally(ctx context.Context, key Key) {
	d.shared.counters.fallbacks.Add(1)
	d.log(ctx, slog.LevelDebug, "dedupe: fallback", key, d.fb.local.Backend(), phaseClaim, nil)
}

// isOutage reports whether err from a store call means the store is failing,
// rather than the call being invalid or abandoned by its caller.
func isOutage(ctx context.Context, err error) bool {
	return ctx.Err() == nil && ambiguous(err) && !errors.Is(err, context.Canceled)
}

// markWithFallback marks key on the fallback store and on the primary, or
// queues the primary's mark in the backlog if the primary fails or is being
// avoided.
func (d *Deduper) markWithFallback(ctx context.Context, h holding, key Key) {
	_ = d.markOn(ctx, d.fb.local, key) // also drops the fallback's claim
	probe, try := d.fb.usePrimary()
	if try || h.primary {
		err := d.markOn(ctx, d.shared.store, key)
		if try {
			d.fb.primaryDone(probe, err == nil, err != nil && isOutage(ctx, err))
		}
		if err == nil {
			return
		}
	}
	if l, ok := d.shared.store.(*LayeredStore); ok {
		l.mark(ctx, key, d.ttl, len(l.layers)-1) // the front answers copies meanwhile
	}
	d.deferMark(key)
}

// deferMark queues key's mark for the primary store in the backlog, which
// writes it once the store answers again, within the mark's TTL.
func (d *Deduper) deferMark(key Key) {
	ttl := d.ttl
	until := d.now().Add(orDefault(ttl, DefaultTTL))
	st := d.shared.store
	d.shared.counters.deferred.Add(1)
	d.shared.pending.add(key)
	d.shared.backlog.add(d, job{
		until: until,
		do: func(ctx context.Context) error {
			left := until.Sub(d.now())
			if ttl <= 0 {
				left = 0 // the store's own default, as the first attempt had
			}
			return st.Mark(ctx, key, left)
		},
		end: func(done bool) {
			if done {
				d.shared.counters.replayed.Add(1)
			}
			d.shared.pending.remove(key)
		},
	})
}
