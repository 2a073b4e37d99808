package dedupe

import (
	"context"
	"time"
)

// The memory store's [BatchStore] methods: each item is its one-key call,
// done in order under its shard's lock, at one reading of the clock for the
// batch. The store and the context are checked once, before the first item:
// a batch on a closed store or with a done context fails every item and
// does nothing.

var _ BatchStore = (*MemoryStore)(nil)

// ClaimEach is [MemoryStore.Claim] for each claims[i]; see [BatchStore].
func (s *MemoryStore) ClaimEach(ctx context.Context, claims []Claim, lease time.Duration) ([]Status, []error) {
	statuses, errs := make([]Status, len(claims)), make([]error, len(claims))
	if len(claims) == 0 {
		return statuses, errs
	}
	if err := checkBatch(ctx, s.closed.Load()); err != nil {
		return statuses, fillErrs(errs, err)
	}
	lease = orDefault(lease, s.lease)
	now := s.nanotime()
	for i, c := range claims {
		if err := c.Validate(); err != nil {
			errs[i] = err
			continue
		}
		statuses[i], errs[i] = s.claim(c, lease, now)
	}
	return statuses, errs
}

// ExtendEach is [MemoryStore.Extend] for each claims[i]; see [BatchStore].
func (s *MemoryStore) ExtendEach(ctx context.Context, claims []Claim, lease time.Duration) []error {
	lease = orDefault(lease, s.lease)
	return s.updateEach(ctx, "extend", claims, func(sh *memShard, c Claim, now int64) {
		sh.claims[c.Key] = memClaim{expires: now + int64(lease), token: c.Token}
	})
}

// ReleaseEach is [MemoryStore.Release] for each claims[i]; see [BatchStore].
func (s *MemoryStore) ReleaseEach(ctx context.Context, claims []Claim) []error {
	return s.updateEach(ctx, "release", claims, func(sh *memShard, c Claim, _ int64) {
		s.dropClaim(sh, c.Key)
	})
}

// updateEach runs f under its shard's lock for each claim that still holds
// its key, and returns [ErrNotOwner] for the others.
func (s *MemoryStore) updateEach(ctx context.Context, op string, claims []Claim, f func(*memShard, Claim, int64)) []error {
	errs := make([]error, len(claims))
	if len(claims) == 0 {
		return errs
	}
	if err := checkBatch(ctx, s.closed.Load()); err != nil {
		return fillErrs(errs, err)
	}
	now := s.nanotime()
	for i, c := range claims {
		// The one-key rule, the store and ctx being checked: ErrInvalidKey
		// for the key, ErrNotOwner for a token no store makes.
		if errs[i] = checkClaimCall(context.Background(), false, c); errs[i] != nil {
			continue
		}
		errs[i] = s.updateHeld(op, c, now, func(sh *memShard, now int64) { f(sh, c, now) })
	}
	return errs
}

// MarkEach is [MemoryStore.MarkResult] for each keys[i] with results[i], or
// [MemoryStore.Mark] where results is nil; see [BatchStore].
func (s *MemoryStore) MarkEach(ctx context.Context, keys []Key, results [][]byte, ttl time.Duration) []error {
	errs := make([]error, len(keys))
	if len(keys) == 0 {
		return errs
	}
	if err := checkBatch(ctx, s.closed.Load()); err != nil {
		return fillErrs(errs, err)
	}
	if err := checkResults(s.Backend(), keys, results); err != nil {
		return fillErrs(errs, err)
	}
	ttl = orDefault(ttl, s.ttl)
	now := s.nanotime()
	for i, k := range keys {
		var res []byte
		if results != nil {
			res = results[i]
		}
		if errs[i] = k.Validate(); errs[i] == nil {
			errs[i] = checkResult(s.Backend(), k, res)
		}
		if errs[i] == nil {
			s.mark(k, res, ttl, now)
		}
	}
	return errs
}
