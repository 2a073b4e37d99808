package dedupe

import (
	"context"
	"time"
)

// CleanupExpired deletes expired marks and claims and returns how many rows it
// deleted. It works in transactions of at most [SQLiteConfig.CleanupBatch] rows
// per table, so other writers wait at most for one of them, and stops early,
// returning the count so far, when ctx is done.
//
// Marks whose expires_at is NULL or unreadable are kept (they are present
// forever). A mark written by another program with an RFC 3339 offset may be
// deleted some hours after it expired, once its text sorts before the current
// local time; it is absent to every method from its expiry all the same.
func (s *SQLiteStore) CleanupExpired(ctx context.Context) (int64, error) {
	if s.isClosed.Load() {
		return 0, ErrClosed
	}
	var total int64
	cur := sqliteCursor{rowid: -1 << 63}
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		op := &sqliteOp{kind: sqliteCleanup, cur: cur}
		if err := s.submit(ctx, op); err != nil {
			return total, err
		}
		total += op.n
		if op.finished {
			return total, nil
		}
		cur = op.cur
	}
}

// sqliteCursor is a position in the expires_at index of the marks table.
type sqliteCursor struct {
	expires string
	rowid   int64
}

// applyCleanup deletes up to s.batch expired claims and up to s.batch expired
// marks in the store's own format; once those are gone, it goes on through the
// marks in other formats whose text sorts at or before the current local time
// (which holds every expired row in a naive format), from op.cur on, s.batch
// at a time, parsing each and deleting it if it has expired.
func (s *SQLiteStore) applyCleanup(ctx context.Context, op *sqliteOp, now time.Time) error {
	nowText := formatSQLiteTime(now, s.loc)
	res, err := s.stmt.cleanClaims.ExecContext(ctx, now.UnixNano(), s.batch)
	if err != nil {
		return sqliteError("cleanup", err, s.busy)
	}
	nClaims, _ := res.RowsAffected()
	if res, err = s.stmt.cleanMarks.ExecContext(ctx, nowText, s.batch); err != nil {
		return sqliteError("cleanup", err, s.busy)
	}
	nMarks, _ := res.RowsAffected()
	op.n = nClaims + nMarks
	if nClaims == int64(s.batch) || nMarks == int64(s.batch) {
		return nil // more to do
	}
	rows, err := s.stmt.cleanScan.QueryContext(ctx, nowText, op.cur.expires, op.cur.rowid, s.batch)
	if err != nil {
		return sqliteError("cleanup", err, s.busy)
	}
	var expired []int64
	scanned := 0
	for rows.Next() {
		var rowid int64
		var exp string
		if err := rows.Scan(&rowid, &exp); err != nil {
			rows.Close()
			return sqliteError("cleanup", err, s.busy)
		}
		scanned++
		op.cur = sqliteCursor{expires: exp, rowid: rowid}
		if t, ok := parseSQLiteTime(exp, s.loc); ok && !now.Before(t) {
			expired = append(expired, rowid)
		}
	}
	if err := rows.Err(); err != nil {
		return sqliteError("cleanup", err, s.busy)
	}
	for _, id := range expired {
		if _, err := s.stmt.cleanRow.ExecContext(ctx, id); err != nil {
			return sqliteError("cleanup", err, s.busy)
		}
	}
	op.n += int64(len(expired))
	op.finished = scanned < s.batch
	return nil
}

// sweep calls CleanupExpired every interval until ctx is cancelled.
func (s *SQLiteStore) sweep(ctx context.Context, interval time.Duration) {
	defer close(s.sweeperDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// A failure (a lock held too long, a closed store) is retried at
			// the next tick; expired rows are absent to readers meanwhile.
			_, _ = s.CleanupExpired(ctx)
		}
	}
}
