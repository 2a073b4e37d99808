package dedupe

import (
	"context"
	"errors"
	"math"
	"time"
)

// CleanupExpired deletes expired marks and claims, in transactions of at most
// [SQLiteConfig].CleanupBatch rows per table so other writers never wait long,
// and returns how many rows it deleted, stopping early when ctx is done. Marks
// whose expires_at is NULL or unreadable are kept: they never expire.
func (s *SQLiteStore) CleanupExpired(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	var total int64
	cur := sqliteCursor{rowid: math.MinInt64}
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		step := sqliteCleanupStep{cur: cur}
		err := s.submit(ctx, "cleanup", s.table, func(ctx context.Context, now time.Time) error {
			return s.inSavepoint(ctx, func() error { return s.cleanupStep(ctx, now, &step) })
		})
		if err != nil {
			return total, err
		}
		total += step.n
		if step.finished {
			return total, nil
		}
		cur = step.cur
	}
}

// sqliteCleanupStep is one transaction of CleanupExpired: where its scan of
// the marks in other formats resumes, and, once it ran, how many rows it
// deleted, and whether nothing is left to delete.
type sqliteCleanupStep struct {
	cur      sqliteCursor
	n        int64
	finished bool
}

// sqliteCursor is a position in the expires_at index of the marks table.
type sqliteCursor struct {
	expires string
	rowid   int64
}

// cleanupStep deletes up to a batch of expired claims and up to a batch of
// expired marks in the store's own format; once those are gone, it goes on
// through the marks in other formats whose text sorts at or before the
// current local time (which holds every expired row in a naive format), from
// st.cur on, a batch at a time, parsing each and deleting it if it has
// expired.
func (s *SQLiteStore) cleanupStep(ctx context.Context, now time.Time, st *sqliteCleanupStep) error {
	nowText := formatSQLiteTime(now, s.loc)
	res, err := s.stmt.cleanClaims.ExecContext(ctx, now.UnixNano(), s.cleanupBatch)
	if err != nil {
		return err
	}
	nClaims, _ := res.RowsAffected()
	if res, err = s.stmt.cleanMarks.ExecContext(ctx, nowText, s.cleanupBatch); err != nil {
		return err
	}
	nMarks, _ := res.RowsAffected()
	if res, err = s.stmt.cleanResults.ExecContext(ctx, nowText, s.cleanupBatch); err != nil {
		return err
	}
	nResults, _ := res.RowsAffected()
	st.n = nClaims + nMarks
	if nClaims == int64(s.cleanupBatch) || nMarks == int64(s.cleanupBatch) || nResults == int64(s.cleanupBatch) {
		return nil // more to do
	}
	expired, scanned, err := s.scanOtherFormats(ctx, now, nowText, &st.cur)
	if err != nil {
		return err
	}
	for _, id := range expired {
		if _, err := s.stmt.cleanRow.ExecContext(ctx, id); err != nil {
			return err
		}
	}
	st.n += int64(len(expired))
	st.finished = scanned < s.cleanupBatch
	return nil
}

// scanOtherFormats reads up to a batch of marks in formats other than the
// store's whose text sorts at or before nowText, after cur, and returns the
// rowids of those expired at now and how many it read. It moves cur past them.
func (s *SQLiteStore) scanOtherFormats(ctx context.Context, now time.Time, nowText string, cur *sqliteCursor) (expired []int64, scanned int, err error) {
	rows, err := s.stmt.cleanScan.QueryContext(ctx, nowText, cur.expires, cur.rowid, s.cleanupBatch)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var rowid int64
		var exp string
		if err := rows.Scan(&rowid, &exp); err != nil {
			return nil, 0, err
		}
		scanned++
		*cur = sqliteCursor{expires: exp, rowid: rowid}
		if t, ok := parseSQLiteTime(exp, s.loc); ok && !now.Before(t) {
			expired = append(expired, rowid)
		}
	}
	return expired, scanned, rows.Err()
}

// sweep calls CleanupExpired every interval until ctx is cancelled, and logs
// its failures, which it retries at the next tick; expired rows are absent to
// readers meanwhile.
func (s *SQLiteStore) sweep(ctx context.Context, interval time.Duration) {
	defer close(s.sweeperDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.CleanupExpired(ctx)
		if err != nil && ctx.Err() == nil && !errors.Is(err, ErrClosed) {
			s.log.Warn("dedupe: sqlite: background cleanup failed", "table", s.table, "deleted", n, "error", err)
		}
	}
}
