package reply

import (
	"context"
	"errors"
	"fmt"
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

// held is the lock of one reply, which Send holds while it handles it.
type held struct {
	s     *Sender
	c     dedupe.Claim
	key   dedupe.Key
	slot  int
	since time.Time // when the lease last began, on the local clock
}

// lock claims the lock key of reply slot of key.
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
	return h, nil
}

// renew begins the lock's lease anew, before a send, so that the send has
// a whole lease (compose may have taken much of the first). A lock lost
// meanwhile (compose outlasted the lease, and another copy may have taken
// the reply) is [dedupe.ErrInFlight]: nothing is sent.
func (h *held) renew(ctx context.Context) error {
	since := time.Now()
	if err := h.s.store.Extend(ctx, h.c, h.s.o.lease); err != nil {
		if errors.Is(err, dedupe.ErrNotOwner) {
			err = fmt.Errorf("%w: its lock ran out before the send: %w", dedupe.ErrInFlight, err)
		}
		return fmt.Errorf("reply: %s: lock %s slot %d: %w", h.s.p.Name, h.key, h.slot, err)
	}
	h.since = since
	return nil
}

// left is what remains of the lock's lease: the bound on a send.
func (h *held) left() time.Duration {
	return h.s.o.lease - time.Since(h.since)
}

// release drops the lock, even if ctx has ended.
func (h *held) release(ctx context.Context) {
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
