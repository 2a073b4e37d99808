package reply

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
)

// checkArgs refuses what Send cannot handle before any I/O.
func (s *Sender) checkArgs(key dedupe.Key, slot int, send SendFunc) error {
	if s == nil || s.store == nil {
		return errors.New("reply: nil Sender or store")
	}
	if err := key.Validate(); err != nil {
		return fmt.Errorf("reply: %s: %w", s.p.Name, err)
	}
	if slot < 0 {
		return fmt.Errorf("reply: %s: %s: slot %d: %w", s.p.Name, key, slot, dedupe.ErrInvalidKey)
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

// lock claims the lock key of reply slot of key, and returns the function
// that releases it.
func (s *Sender) lock(ctx context.Context, key dedupe.Key, slot int) (func(), error) {
	c := dedupe.NewClaim(lockKey(key, slot))
	switch st, err := s.store.Claim(ctx, c, s.o.lease); {
	case err != nil:
		// A claim whose outcome is unknown runs out with its lease.
		return nil, fmt.Errorf("reply: %s: lock %s slot %d: %w", s.p.Name, key, slot, err)
	case st == dedupe.InFlight:
		return nil, fmt.Errorf("reply: %s: %s slot %d is being sent: %w", s.p.Name, key, slot, dedupe.ErrInFlight)
	case st != dedupe.Claimed:
		return nil, fmt.Errorf("reply: %s: lock %s slot %d: lock key marked (%v)", s.p.Name, key, slot, st)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := s.store.Release(ctx, c); err != nil && !errors.Is(err, dedupe.ErrNotOwner) {
			s.o.log.Warn("reply: lock not released; it runs out with its lease", "platform", s.p.Name,
				"key", key.String(), "slot", slot, "err", err)
		}
	}, nil
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
