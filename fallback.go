package dedupe

import (
	"context"
	"errors"
	"sync"
	"time"
)

// breakerFailures is how many primary failures in a row make the fallback
// serve alone for the retry period.
const breakerFailures = 3

// fallbackLayer names, in logs, the fallback store when it served a claim
// alone.
const fallbackLayer = "fallback"

// fallbackStore is the Store a Deduper with [WithFallback] works on: claims
// go to the local store first and the primary second, and the local store
// serves alone while the primary fails. Work the primary misses (the release
// of a claim it may hold, a mark) goes to the backlog, so its Mark and
// Release report no outage: the local store took them, the primary will.
// What the primary refuses for good (a closed or full store) they report,
// since it never will.
type fallbackStore struct {
	primary, local Store
	lease          time.Duration // of the Deduper's claims, for queued releases
	backlog        *backlog
	cs             *counters
	onError        func(ctx context.Context, key Key, st Store, phase int, err error)
	breaker        breaker

	mu        sync.Mutex
	localOnly map[Key]string // claims served by the local store alone: key → token
}

var _ decider = (*fallbackStore)(nil)

func (d *Deduper) newFallback() *fallbackStore {
	if d.local == nil {
		return nil
	}
	return &fallbackStore{
		primary: d.shared.store, local: d.local,
		lease:   d.lease,
		backlog: d.shared.backlog, cs: &d.shared.counters, onError: d.storeError,
		breaker:   breaker{retry: d.retry, now: d.now},
		localOnly: make(map[Key]string),
	}
}

// Claim claims c on the local store, then on the primary; see claimBy.
func (f *fallbackStore) Claim(ctx context.Context, c Claim, lease time.Duration) (Status, error) {
	st, _, err := f.claimBy(ctx, c, lease)
	return st, err
}

// claimBy claims c on the local store, then on the primary. If the primary
// is failing, the local store serves the claim alone ("fallback"); if it
// refuses, the local claim goes too. A front layer of a layered primary
// answers a duplicate first, without a claim.
func (f *fallbackStore) claimBy(ctx context.Context, c Claim, lease time.Duration) (Status, string, error) {
	if fr, ok := f.primary.(fronted); ok {
		if layer, dup := fr.frontMarked(ctx, c.Key); dup {
			return Duplicate, layer, nil
		}
	}
	status, err := f.local.Claim(ctx, c, lease)
	if err != nil || status != Claimed {
		return status, fallbackLayer, err
	}
	probe, try := f.breaker.usePrimary()
	if !try {
		return f.serveLocally(c), fallbackLayer, nil
	}
	status, layer, err := claimSettled(ctx, f.primary, c, lease, f.backlog)
	outage := err != nil && isOutage(ctx, err)
	f.breaker.primaryDone(probe, err == nil, outage)
	switch {
	case err == nil && status == Claimed:
		return Claimed, layer, nil
	case outage:
		f.onError(ctx, c.Key, f.primary, phaseClaim, err)
		return f.serveLocally(c), fallbackLayer, nil
	}
	// The primary refused (duplicate, in flight) or the call was invalid or
	// abandoned: the local claim goes too.
	if rerr := f.local.Release(context.WithoutCancel(ctx), c); rerr != nil && !errors.Is(rerr, ErrNotOwner) {
		f.onError(ctx, c.Key, f.local, phaseRelease, rerr)
	}
	return status, layer, err
}

// serveLocally records that the local store alone holds c.
func (f *fallbackStore) serveLocally(c Claim) Status {
	f.cs.fallbacks.Add(1)
	f.mu.Lock()
	f.localOnly[c.Key] = c.Token
	f.mu.Unlock()
	return Claimed
}

// heldLocally reports whether c is held by the local store alone, and with
// forget set stops remembering it.
func (f *fallbackStore) heldLocally(c Claim, forget bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	tok, ok := f.localOnly[c.Key]
	if forget && ok {
		delete(f.localOnly, c.Key)
	}
	return ok && (c.Token == "" || tok == c.Token)
}

// Mark marks key on the local store and on the primary. A mark the primary
// does not take, or that the open breaker keeps from it, is queued in the
// backlog, and a layered primary's front layers answer copies meanwhile. A
// mark the primary refuses for good (a closed or full store) is not: Mark
// returns its error, as the primary alone would, since no retry can land it.
func (f *fallbackStore) Mark(ctx context.Context, key Key, ttl time.Duration) error {
	return f.MarkResult(ctx, key, nil, ttl)
}

// MarkResult is Mark, keeping res with the mark on each store that can.
func (f *fallbackStore) MarkResult(ctx context.Context, key Key, res []byte, ttl time.Duration) error {
	if err := checkResult(f.Backend(), key, res); err != nil {
		return err
	}
	_ = markWith(ctx, f.local, key, res, ttl) // also drops the local claim
	held := !f.heldLocally(Claim{Key: key}, true)
	probe, try := f.breaker.usePrimary()
	if try || held {
		err := markWith(ctx, f.primary, key, res, ttl)
		if try {
			f.breaker.primaryDone(probe, err == nil, err != nil && isOutage(ctx, err))
		}
		if err == nil {
			return nil
		}
		if !ambiguous(err) {
			return err // the Deduper reports it: processed but not marked
		}
		f.onError(ctx, key, f.primary, phaseMark, err)
	}
	if fr, ok := f.primary.(fronted); ok {
		fr.markFront(ctx, key, res, ttl)
	}
	f.backlog.queueMark(f.primary, key, res, ttl).leave(f.cs)
	return nil
}

// Extend renews c on the local store and, unless it holds c alone, on the
// primary.
func (f *fallbackStore) Extend(ctx context.Context, c Claim, lease time.Duration) error {
	if err := f.local.Extend(ctx, c, lease); err != nil {
		return err
	}
	if f.heldLocally(c, false) {
		return nil
	}
	return f.primary.Extend(ctx, c, lease)
}

// Release drops c on the local store and, unless it held c alone, on the
// primary; a release the primary does not take is queued in the backlog.
func (f *fallbackStore) Release(ctx context.Context, c Claim) error {
	lerr := f.local.Release(ctx, c)
	if f.heldLocally(c, true) {
		return lerr
	}
	perr := f.primary.Release(ctx, c)
	if perr != nil && !errors.Is(perr, ErrNotOwner) && isOutage(ctx, perr) {
		f.onError(ctx, c.Key, f.primary, phaseRelease, perr)
		f.backlog.queueRelease(f.primary, c, f.lease)
		return nil
	}
	return perr
}

// Exists asks the primary, or the local store while the primary fails.
func (f *fallbackStore) Exists(ctx context.Context, key Key) (bool, error) {
	probe, try := f.breaker.usePrimary()
	if try {
		ok, err := f.primary.Exists(ctx, key)
		f.breaker.primaryDone(probe, err == nil, err != nil && isOutage(ctx, err))
		if err == nil || !isOutage(ctx, err) {
			return ok, err
		}
	}
	return f.local.Exists(ctx, key)
}

// Result asks the primary, or the local store while the primary fails.
func (f *fallbackStore) Result(ctx context.Context, key Key) ([]byte, bool, error) {
	probe, try := f.breaker.usePrimary()
	if try {
		res, ok, err := f.primary.Result(ctx, key)
		f.breaker.primaryDone(probe, err == nil, err != nil && isOutage(ctx, err))
		if err == nil || !isOutage(ctx, err) {
			return res, ok, err
		}
	}
	return f.local.Result(ctx, key)
}

// Backend returns the primary's backend.
func (f *fallbackStore) Backend() string { return f.primary.Backend() }

// Close does nothing: the Deduper does not own its stores.
func (f *fallbackStore) Close() error { return nil }

// breaker is a circuit breaker on the primary store.
type breaker struct {
	retry time.Duration
	now   func() time.Time

	mu        sync.Mutex
	failures  int       // primary failures in a row
	openUntil time.Time // local serves alone until then
	probing   bool      // a call is probing the primary
}

// usePrimary reports whether a call should try the primary store. While the
// breaker is open it answers false; once the retry period is over it answers
// true to one call at a time, the probe, until the primary answers again.
func (b *breaker) usePrimary() (probe bool, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() {
		return false, true
	}
	if b.probing || b.now().Before(b.openUntil) {
		return false, false
	}
	b.probing = true
	return true, true
}

// primaryDone records the outcome of a call that tried the primary: ok false
// for an outage. A probe that ended otherwise (the caller gave up) leaves the
// breaker as it was, ready for another probe.
func (b *breaker) primaryDone(probe, ok, outage bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if probe {
		b.probing = false
	}
	switch {
	case ok:
		b.failures = 0
		b.openUntil = time.Time{}
	case outage:
		b.failures++
		if probe || b.failures >= breakerFailures {
			b.openUntil = b.now().Add(b.retry)
		}
	}
}
