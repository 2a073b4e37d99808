package reply

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe"
)

// checkReply refuses a reply whose record cannot be kept, before any I/O.
func (s *Sender) checkReply(key dedupe.Key, slot int) error {
	if s == nil || s.store == nil {
		return errors.New("reply: nil Sender or store")
	}
	if err := key.Validate(); err != nil {
		return fmt.Errorf("reply: %s: %w", s.p.Name, err)
	}
	if slot < 0 {
		return fmt.Errorf("reply: %s: %s: slot %d: %w", s.p.Name, key, slot, dedupe.ErrInvalidKey)
	}
	return nil
}

// checkArgs refuses what Send cannot handle, before any I/O.
func (s *Sender) checkArgs(key dedupe.Key, slot int, send SendFunc) error {
	if err := s.checkReply(key, slot); err != nil {
		return err
	}
	if send == nil {
		return fmt.Errorf("reply: %s: %s slot %d: nil SendFunc", s.p.Name, key, slot)
	}
	return nil
}

// checkBody refuses a body whose record would not fit in a store's result.
func (s *Sender) checkBody(key dedupe.Key, slot int, body []byte) error {
	if len(body) > maxBody {
		return fmt.Errorf("reply: %s: %s slot %d: body of %d bytes, over %d: %w",
			s.p.Name, key, slot, len(body), maxBody, dedupe.ErrTooLarge)
	}
	return nil
}

// held is the lock of one reply, which Send holds while it handles it. A
// goroutine renews its lease every third of it (the heartbeat) until
// release; if no renewal reaches the store within a lease, or one finds the
// lock taken over, ctx is cancelled with a cause matching
// [dedupe.ErrInFlight], and so is any send under way.
type held struct {
	s    *Sender
	c    dedupe.Claim
	key  dedupe.Key
	slot int

	ctx    context.Context // the caller's, cancelled when the lock is lost
	cancel context.CancelCauseFunc
	stop   chan struct{} // closed by release: the heartbeat ends
	done   chan struct{} // closed by the heartbeat when it ended

	mu    sync.Mutex
	since time.Time // when the lease last began, on the local clock
}

// lock claims the lock key of reply slot of key, and starts its heartbeat.
func (s *Sender) lock(ctx context.Context, key dedupe.Key, slot int) (*held, error) {
	h := &held{s: s, c: dedupe.NewClaim(lockKey(key, slot)), key: key, slot: slot, since: time.Now()}
	switch st, err := s.store.Claim(ctx, h.c, s.o.lease); {
	case err != nil:
		// A claim whose outcome is unknown runs out with its lease.
		return nil, fmt.Errorf("reply: %s: lock %s slot %d: %w", s.p.Name, key, slot, err)
	case st == dedupe.InFlight:
		return nil, fmt.Errorf("reply: %s: %s slot %d is being sent: %w", s.p.Name, key, slot, dedupe.ErrInFlight)
	case st != dedupe.Claimed:
		return nil, fmt.Errorf("reply: %s: lock %s slot %d: lock key marked (%v)", s.p.Name, key, slot, st)
	}
	h.ctx, h.cancel = context.WithCancelCause(ctx)
	h.stop, h.done = make(chan struct{}), make(chan struct{})
	go h.heartbeat(context.WithoutCancel(ctx))
	return h, nil
}

// heartbeat renews the lock every third of its lease until release, and
// cancels h.ctx once the lock is lost.
func (h *held) heartbeat(ctx context.Context) {
	defer close(h.done)
	lease := h.s.o.lease
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
		if h.left() <= 0 {
			h.cancel(fmt.Errorf("%w: the lock of %s slot %d ran out before it could be renewed", dedupe.ErrInFlight, h.key, h.slot))
			return
		}
		rctx, cancel := context.WithTimeout(ctx, lease/3)
		err := h.extend(rctx)
		cancel()
		if errors.Is(err, dedupe.ErrNotOwner) {
			h.cancel(fmt.Errorf("%w: the lock of %s slot %d was taken over: %w", dedupe.ErrInFlight, h.key, h.slot, err))
			return
		}
		// Another error: tried again at the next tick, while the lease lasts.
	}
}

// extend renews the lock's lease once.
func (h *held) extend(ctx context.Context) error {
	since := time.Now()
	if err := h.s.store.Extend(ctx, h.c, h.s.o.lease); err != nil {
		return err
	}
	h.mu.Lock()
	h.since = since
	h.mu.Unlock()
	return nil
}

// renew begins the lock's lease anew, before a send, so that the send
// starts with a whole lease. A lock lost meanwhile (the heartbeat could not
// reach the store for a lease, and another copy may have taken the reply)
// is [dedupe.ErrInFlight]: nothing is sent.
func (h *held) renew(ctx context.Context) error {
	if err := context.Cause(h.ctx); err != nil && errors.Is(err, dedupe.ErrInFlight) {
		return fmt.Errorf("reply: %s: lock %s slot %d: %w", h.s.p.Name, h.key, h.slot, err)
	}
	if err := h.extend(ctx); err != nil {
		if errors.Is(err, dedupe.ErrNotOwner) {
			err = fmt.Errorf("%w: its lock ran out before the send: %w", dedupe.ErrInFlight, err)
		}
		return fmt.Errorf("reply: %s: lock %s slot %d: %w", h.s.p.Name, h.key, h.slot, err)
	}
	return nil
}

// left is what remains of the lock's lease, as this process counts it, less
// a margin for a late timer: a twentieth of the lease, at most a second.
func (h *held) left() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	lease := h.s.o.lease
	return lease - min(lease/20, time.Second) - time.Since(h.since)
}

// release stops the heartbeat and drops the lock, even if ctx has ended.
func (h *held) release(ctx context.Context) {
	close(h.stop)
	<-h.done
	h.cancel(context.Canceled)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := h.s.store.Release(ctx, h.c); err != nil && !errors.Is(err, dedupe.ErrNotOwner) {
		h.s.o.log.Warn("reply: lock not released; it runs out with its lease", "platform", h.s.p.Name,
			"key", h.key.String(), "slot", h.slot, "err", err)
	}
}

// read returns the record of reply slot of key, and whether there is one.
func (s *Sender) read(ctx context.Context, key dedupe.Key, slot int) (record, bool, error) {
	res, marked, err := s.store.Result(ctx, recordKey(key, slot))
	switch {
	case err != nil:
		return record{}, false, fmt.Errorf("reply: %s: read %s slot %d: %w", s.p.Name, key, slot, err)
	case !marked:
		return record{}, false, nil
	case res == nil: // marked, its result dropped (a bounded store): never send blind
		return record{}, false, fmt.Errorf("reply: %s: %s slot %d: %w: the store kept the mark without its result",
			s.p.Name, key, slot, ErrBadRecord)
	}
	rec, err := decode(res)
	if err != nil {
		return record{}, false, fmt.Errorf("reply: %s: %s slot %d: %w", s.p.Name, key, slot, err)
	}
	return rec, true, nil
}

// write replaces the record of reply slot of key with rec.
func (s *Sender) write(ctx context.Context, key dedupe.Key, slot int, rec record) error {
	if err := s.store.MarkResult(ctx, recordKey(key, slot), rec.encode(), s.o.ttl); err != nil {
		return fmt.Errorf("reply: %s: record %s slot %d: %w", s.p.Name, key, slot, err)
	}
	return nil
}
