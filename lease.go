package dedupe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// leaseHold keeps a claim's lease while fn runs: one timer renews it every
// renewal interval ([WithRenewal]), and cancels fn's context once the lease
// has ended without a renewal, since another copy may be claimed from then
// on. The timer's callback holds mu while it calls the store, so stop waits
// for a renewal in progress: no renewal outlives Do.
type leaseHold struct {
	d      *Deduper
	c      Claim
	ctx    context.Context // for the store calls: not cancelled with the caller's
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	stopped  bool
	timer    *time.Timer
	deadline time.Time // the lease's end, as far as this process knows
	lost     error     // why fn's context was cancelled, or nil
}

// Lease returns the lease of the claims Do takes ([WithLease]): how long a
// message stays claimed after the process that ran it died, before a copy
// can be run. While fn runs the lease is renewed.
func (d *Deduper) Lease() time.Duration { return d.lease }

// hold starts keeping c's lease, taken at claimed, and returns the context
// for fn, cancelled when the lease is lost.
func (d *Deduper) hold(ctx context.Context, c Claim, claimed time.Time) (context.Context, *leaseHold) {
	fctx, cancel := context.WithCancelCause(ctx)
	// Renew as long as fn runs, even if the caller's context is cancelled
	// meanwhile (a platform that timed out and hung up): a handler that goes on
	// must keep its claim, or a copy could run beside it.
	h := &leaseHold{d: d, c: c, ctx: context.WithoutCancel(ctx), cancel: cancel, deadline: claimed.Add(d.lease - leaseMargin(d.lease))}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timer = time.AfterFunc(h.next(time.Now()), h.tick)
	return fctx, h
}

// leaseMargin is how long before a lease's end, as this process counts it,
// Do ends fn's context: a twentieth of the lease, at most a second, so that a
// late timer on a loaded machine still ends fn before the store lets another
// copy claim the message.
func leaseMargin(lease time.Duration) time.Duration { return min(lease/20, time.Second) }

// next returns how long to wait, from now, for the next tick: the renewal
// interval, or less to end the lease on time.
func (h *leaseHold) next(now time.Time) time.Duration {
	left := h.deadline.Sub(now)
	if h.d.renew > 0 {
		return min(left, h.d.renew)
	}
	return left
}

// tick renews the lease, or ends it if its time is up.
func (h *leaseHold) tick() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	start := time.Now()
	if !start.Before(h.deadline) {
		h.d.shared.counters.leasesLost.Add(1)
		h.lose(fmt.Errorf("%w: %s: the lease of %v ran out before it could be renewed", ErrNotOwner, h.c.Key, h.d.lease))
		return
	}
	if h.d.renew > 0 {
		err := h.d.extend(h.ctx, h.c, min(h.d.renew, cleanupTimeout, h.deadline.Sub(start)))
		switch {
		case err == nil:
			h.deadline = start.Add(h.d.lease - leaseMargin(h.d.lease))
		case errors.Is(err, ErrNotOwner):
			h.lose(err)
			return
		}
	}
	h.timer.Reset(h.next(time.Now()))
}

// lose cancels fn's context with cause. Called with mu held.
func (h *leaseHold) lose(cause error) {
	h.lost = cause
	h.d.shared.counters.abandoned.Add(1)
	h.d.log(h.ctx, slog.LevelWarn, "dedupe: lease lost, handler's context cancelled", h.c.Key, phaseExtend, cause)
	h.cancel(cause)
}

// stop stops the timer, waiting for a renewal in progress, and returns why
// the lease was lost, or nil.
func (h *leaseHold) stop() error {
	h.mu.Lock()
	h.stopped = true
	h.timer.Stop()
	lost := h.lost
	h.mu.Unlock()
	h.cancel(context.Canceled)
	return lost
}

// extend renews c's lease once, with a call bounded by timeout, and returns
// the store's error.
func (d *Deduper) extend(ctx context.Context, c Claim, timeout time.Duration) error {
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := d.timed(ectx, phaseExtend, func(ctx context.Context) error { return d.st.Extend(ctx, c, d.lease) })
	switch {
	case errors.Is(err, ErrNotOwner):
		d.shared.counters.leasesLost.Add(1)
		d.log(ctx, slog.LevelWarn, "dedupe: claim lost while processing", c.Key, phaseExtend, err)
	case err != nil:
		d.storeError(ctx, c.Key, d.st, phaseExtend, err) // tried again at the next tick
	}
	return err
}

// eachHold keeps the leases of the claims of a batch ([Deduper.DoEach]) from
// their claim until their fn returned: one timer renews those still held in
// one [BatchStore.ExtendEach] every renewal interval, and cancels the
// context of each whose lease ended without a renewal, or that a renewal
// found taken over. As leaseHold, the timer's callback holds mu while it
// calls the store.
type eachHold struct {
	d      *Deduper
	st     BatchStore
	parent context.Context // the caller's, which fn's contexts derive from
	ctx    context.Context // for the store calls: not cancelled with the caller's

	mu      sync.Mutex
	stopped bool
	timer   *time.Timer
	items   map[int]*heldClaim // by the key's index in the batch
}

// heldClaim is one claim of an eachHold.
type heldClaim struct {
	c        Claim
	deadline time.Time // the lease's end, as far as this process knows
	started  bool
	done     bool // its fn returned: no longer renewed
	cancel   context.CancelCauseFunc
	lost     error
}

// holdEach starts keeping the leases of claims[i], taken at claimed[i], for
// each i of held.
func (d *Deduper) holdEach(ctx context.Context, st BatchStore, claims []Claim, claimed []time.Time, held []int) *eachHold {
	h := &eachHold{d: d, st: st, parent: ctx, ctx: context.WithoutCancel(ctx), items: make(map[int]*heldClaim, len(held))}
	for _, i := range held {
		h.items[i] = &heldClaim{c: claims[i], deadline: claimed[i].Add(d.lease - leaseMargin(d.lease))}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timer = time.AfterFunc(h.next(time.Now()), h.tick)
	return h
}

// next returns how long to wait, from now, for the next tick: the renewal
// interval, or less to end a lease on time; a lease's length when there is
// neither (renewal off, every fn returned), so the timer never spins.
func (h *eachHold) next(now time.Time) time.Duration {
	wait := time.Duration(-1)
	if h.d.renew > 0 {
		wait = h.d.renew
	}
	for _, it := range h.items {
		if !it.done && it.lost == nil && (wait < 0 || it.deadline.Sub(now) < wait) {
			wait = it.deadline.Sub(now)
		}
	}
	if wait < 0 { // no renewal, and no lease left to end: nothing to time
		return h.d.lease
	}
	return max(wait, 0)
}

// start returns the context for key i's fn, or why its lease was lost
// before it started.
func (h *eachHold) start(i int) (context.Context, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	it := h.items[i]
	it.started = true
	if it.lost != nil {
		return nil, it.lost
	}
	var fctx context.Context
	fctx, it.cancel = context.WithCancelCause(h.parent)
	return fctx, nil
}

// unstarted reports whether key i's fn has not started.
func (h *eachHold) unstarted(i int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.items[i].started
}

// stop stops renewing key i's lease and returns why it was lost, or nil.
func (h *eachHold) stop(i int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	it := h.items[i]
	it.done = true
	if it.cancel != nil {
		it.cancel(context.Canceled)
	}
	return it.lost
}

// stopAll stops the timer, waiting for a renewal in progress.
func (h *eachHold) stopAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.stopped = true
	h.timer.Stop()
	for _, it := range h.items {
		if it.cancel != nil {
			it.cancel(context.Canceled)
		}
	}
}

// tick renews the leases still held, and ends those whose time is up.
func (h *eachHold) tick() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	start := time.Now()
	var live []*heldClaim
	left := cleanupTimeout
	for _, it := range h.items {
		switch {
		case it.done || it.lost != nil:
		case !start.Before(it.deadline):
			h.d.shared.counters.leasesLost.Add(1)
			h.lose(it, fmt.Errorf("%w: %s: the lease of %v ran out before it could be renewed", ErrNotOwner, it.c.Key, h.d.lease))
		default:
			live = append(live, it)
			left = min(left, it.deadline.Sub(start))
		}
	}
	if h.d.renew > 0 && len(live) > 0 {
		h.renew(live, start, min(h.d.renew, left))
	}
	h.timer.Reset(h.next(time.Now()))
}

// renew extends the leases of live in one call bounded by timeout. Called
// with mu held.
func (h *eachHold) renew(live []*heldClaim, start time.Time, timeout time.Duration) {
	claims := make([]Claim, len(live))
	for n, it := range live {
		claims[n] = it.c
	}
	ectx, cancel := context.WithTimeout(h.ctx, timeout)
	defer cancel()
	var errs []error
	_ = h.d.timed(ectx, phaseExtend, func(ctx context.Context) error {
		errs = h.st.ExtendEach(ctx, claims, h.d.lease)
		return nil
	})
	for n, it := range live {
		switch err := errs[n]; {
		case err == nil:
			it.deadline = start.Add(h.d.lease - leaseMargin(h.d.lease))
		case errors.Is(err, ErrNotOwner):
			h.d.shared.counters.leasesLost.Add(1)
			h.d.log(ectx, slog.LevelWarn, "dedupe: claim lost while processing", it.c.Key, phaseExtend, err)
			h.lose(it, err)
		default:
			h.d.storeError(ectx, it.c.Key, h.d.st, phaseExtend, err) // tried again at the next tick
		}
	}
}

// lose cancels the context of it's fn, if it started, with cause. Called
// with mu held.
func (h *eachHold) lose(it *heldClaim, cause error) {
	it.lost = cause
	h.d.shared.counters.abandoned.Add(1)
	h.d.log(h.ctx, slog.LevelWarn, "dedupe: lease lost, handler's context cancelled", it.c.Key, phaseExtend, cause)
	if it.cancel != nil {
		it.cancel(cause)
	}
}
