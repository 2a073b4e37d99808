package dedupe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// leaseRenewal extends a claim's lease from a timer while fn runs. Its timer
// callback holds mu while it calls the stores, so stop waits for a renewal in
// progress: no renewal outlives Do.
type leaseRenewal struct {
	mu      sync.Mutex
	stopped bool
	timer   *time.Timer
}

// renewLease starts renewing claim c on the stores h names every renewal
// interval, until stop. It returns nil if renewal is off.
func (d *Deduper) renewLease(ctx context.Context, h holding, c Claim) *leaseRenewal {
	if d.renew <= 0 {
		return nil
	}
	// Renew as long as fn runs, even if the caller's context is cancelled
	// meanwhile (a platform that timed out and hung up): a handler that goes on
	// must keep its claim, or a copy could run beside it.
	ctx = context.WithoutCancel(ctx)
	stores := h.stores(d)
	r := &leaseRenewal{}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timer = time.AfterFunc(d.renew, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.stopped {
			return
		}
		for _, st := range stores {
			if !d.extend(ctx, st, c) {
				return
			}
		}
		r.timer.Reset(d.renew)
	})
	return r
}

// extend renews c on st once, and reports whether to go on renewing.
func (d *Deduper) extend(ctx context.Context, st Store, c Claim) bool {
	err := d.timed(phaseExtend, func() error {
		ectx, cancel := context.WithTimeout(ctx, min(d.renew, cleanupTimeout))
		defer cancel()
		return st.Extend(ectx, c, d.lease)
	})
	switch {
	case errors.Is(err, ErrNotOwner):
		d.shared.counters.leasesLost.Add(1)
		d.log(ctx, slog.LevelWarn, "dedupe: claim lost while processing", c.Key, st.Backend(), phaseExtend, err)
		return false
	case err != nil:
		d.storeError(ctx, c.Key, st, phaseExtend, err) // try again at the next tick
	}
	return true
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
