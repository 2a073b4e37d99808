package dedupe

import (
	"context"
	"fmt"
	"time"
)

// The SQLite store's [BatchStore] methods. A batch is written in chunks of
// at most sqliteEachChunk items, each one call of the group-commit writer
// (sqlite_batch.go) in a savepoint: the items of a chunk commit together, in
// one transaction with the other calls waiting at that moment, or not at all.
// Each item runs the statements of its one-key peer, prepared once
// (sqlite_statements.go).

// sqliteEachChunk bounds the items of one call of the writer, so that a long
// batch does not hold the writer's transaction, and the calls waiting for
// the next one, for long.
const sqliteEachChunk = 500

var _ BatchStore = (*SQLiteStore)(nil)

// ClaimEach is [SQLiteStore.Claim] for each claims[i]; see [BatchStore].
func (s *SQLiteStore) ClaimEach(ctx context.Context, claims []Claim, lease time.Duration) ([]Status, []error) {
	statuses, errs := make([]Status, len(claims)), make([]error, len(claims))
	if len(claims) == 0 {
		return statuses, errs
	}
	if err := checkBatch(ctx, s.closed.Load()); err != nil {
		return statuses, fillErrs(errs, err)
	}
	for i, c := range claims {
		errs[i] = c.Validate()
	}
	lease = orDefault(lease, s.lease)
	s.each(ctx, "claim", errs, func(ctx context.Context, i int, now time.Time) (refused, err error) {
		statuses[i], err = s.claimRow(ctx, claims[i].Key.String(), claims[i].Token, lease, now)
		return nil, err
	})
	for i, err := range errs {
		if err != nil {
			statuses[i] = 0
		}
	}
	return statuses, errs
}

// ExtendEach is [SQLiteStore.Extend] for each claims[i]; see [BatchStore].
func (s *SQLiteStore) ExtendEach(ctx context.Context, claims []Claim, lease time.Duration) []error {
	return s.ownedEach(ctx, "extend", claims, s.extendRow(orDefault(lease, s.lease)))
}

// ReleaseEach is [SQLiteStore.Release] for each claims[i]; see [BatchStore].
func (s *SQLiteStore) ReleaseEach(ctx context.Context, claims []Claim) []error {
	return s.ownedEach(ctx, "release", claims, s.releaseRow)
}

// ownedEach runs change (op) for each claim that still holds its key, and
// returns [ErrNotOwner] for the others.
func (s *SQLiteStore) ownedEach(ctx context.Context, op string, claims []Claim, change sqliteChange) []error {
	errs := make([]error, len(claims))
	if len(claims) == 0 {
		return errs
	}
	if err := checkBatch(ctx, s.closed.Load()); err != nil {
		return fillErrs(errs, err)
	}
	for i, c := range claims {
		// The one-key rule, the store and ctx being checked: ErrInvalidKey
		// for the key, ErrNotOwner for a token no store makes.
		errs[i] = checkClaimCall(context.Background(), false, c)
	}
	s.each(ctx, op, errs, func(ctx context.Context, i int, now time.Time) (refused, err error) {
		return s.ownedRow(ctx, claims[i], claims[i].Key.String(), now, change)
	})
	return errs
}

// MarkEach is [SQLiteStore.MarkResult] for each keys[i] with results[i], or
// [SQLiteStore.Mark] where results is nil; see [BatchStore].
func (s *SQLiteStore) MarkEach(ctx context.Context, keys []Key, results [][]byte, ttl time.Duration) []error {
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
	result := func(i int) []byte {
		if results == nil {
			return nil
		}
		return results[i]
	}
	for i, k := range keys {
		if errs[i] = k.Validate(); errs[i] == nil {
			errs[i] = checkResult(s.Backend(), k, result(i))
		}
	}
	ttl = orDefault(ttl, s.ttl)
	s.each(ctx, "mark", errs, func(ctx context.Context, i int, now time.Time) (refused, err error) {
		return nil, s.markRow(ctx, keys[i], keys[i].String(), result(i), now, ttl)
	})
	return errs
}

// each writes the items i of a batch whose errs[i] is nil, in chunks of at
// most sqliteEachChunk, each one call of the writer in a savepoint. write
// does item i in the writer's transaction, at now; it returns the item's
// refusal (such as [ErrNotOwner]), which each sets as errs[i], or the failure
// of a statement, which rolls the chunk back. A chunk that fails, in a
// statement, its commit or its context, sets its error as every item's.
func (s *SQLiteStore) each(ctx context.Context, op string, errs []error,
	write func(ctx context.Context, i int, now time.Time) (refused, err error)) {
	chunk := make([]int, 0, min(len(errs), sqliteEachChunk)) // the items of a call
	for next := 0; next < len(errs); {
		chunk = chunk[:0]
		for ; next < len(errs) && len(chunk) < cap(chunk); next++ {
			if errs[next] == nil {
				chunk = append(chunk, next)
			}
		}
		if len(chunk) == 0 {
			return
		}
		err := s.submit(ctx, op, fmt.Sprintf("%d keys", len(chunk)), func(ctx context.Context, now time.Time) error {
			return s.inSavepoint(ctx, func() error {
				for _, i := range chunk {
					refused, err := write(ctx, i, now)
					if err != nil {
						return err
					}
					errs[i] = refused
				}
				return nil
			})
		})
		if err != nil {
			for _, i := range chunk {
				errs[i] = err
			}
		}
	}
}
