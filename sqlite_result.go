package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// MarkResult is Mark, keeping result with the mark in the table
// Table+"_results" of the same database; see [Store.MarkResult]. The result
// belongs to the mark it was written with: a later Mark, by this store or by
// NekoBot, leaves the key marked without it. CleanupExpired deletes expired
// results with their marks.
func (s *SQLiteStore) MarkResult(ctx context.Context, key Key, result []byte, ttl time.Duration) error {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return err
	}
	if err := checkResult(s.Backend(), key, result); err != nil {
		return err
	}
	ttl = orDefault(ttl, s.ttl)
	dkey := key.String()
	return s.submit(ctx, "mark", dkey, func(ctx context.Context, now time.Time) error {
		return s.inSavepoint(ctx, func() error { return s.markRow(ctx, key, dkey, result, now, ttl) })
	})
}

// Result returns the result kept with key's mark; see [Store.Result].
func (s *SQLiteStore) Result(ctx context.Context, key Key) ([]byte, bool, error) {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return nil, false, err
	}
	if s.noResults {
		return nil, false, nil
	}
	var exp sql.NullString
	var res []byte
	dkey := key.String()
	err := s.retryBusy(ctx, nil, func() error {
		return s.stmt.resultGet.QueryRowContext(ctx, dkey).Scan(&exp, &res)
	})
	switch {
	case err == nil:
		if !sqliteLive(exp, s.now(), s.loc) {
			return nil, false, nil
		}
		return res, true, nil
	case errors.Is(err, sql.ErrNoRows):
		return nil, false, nil
	case s.closed.Load():
		return nil, false, ErrClosed
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	}
	return nil, false, s.fail("result", dkey, err)
}
