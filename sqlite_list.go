package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// The optional interfaces of package migrate, for the SQLite store. Marks
// are walked in the order of dedupe_key, the table's primary key (SQLite's
// BINARY collation: byte order), the cursor being the last key yielded.

// ListMarks calls yield with up to limit marks whose dedupe_key follows
// cursor, in key order, each with its expiry read as the store reads it
// (naive text in [SQLiteConfig].Location, RFC 3339); a NULL or unreadable
// expires_at, present forever, gives the zero time. It returns the cursor of
// the next page ("" after the last). Expired rows not yet deleted are
// included; claims never are. A dedupe_key is split at its first ':'
// (NekoBot's "web:a:b:c" is channel "web", message id "a:b:c", so that it
// keeps its text form) and not validated. It implements [Lister].
func (s *SQLiteStore) ListMarks(ctx context.Context, cursor string, limit int, yield func(key Key, expires time.Time)) (string, error) {
	if s.closed.Load() {
		return "", ErrClosed
	}
	limit = max(limit, 1)
	type row struct {
		key string
		exp sql.NullString
	}
	var page []row
	err := s.retryBusy(ctx, nil, func() error {
		page = page[:0]
		rows, err := s.db.QueryContext(ctx, "SELECT dedupe_key, expires_at FROM "+s.marks+
			" WHERE dedupe_key > ? ORDER BY dedupe_key LIMIT ?", cursor, limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.key, &r.exp); err != nil {
				return err
			}
			page = append(page, r)
		}
		return rows.Err()
	})
	if err != nil {
		return "", s.fail("list marks", s.table, err)
	}
	for _, r := range page {
		ch, id, _ := strings.Cut(r.key, ":")
		yield(Key{Channel: ch, MessageID: id}, s.expiry(r.exp))
	}
	if len(page) < limit {
		return "", nil
	}
	return page[len(page)-1].key, nil
}

// expiry returns the time of a stored expires_at, or the zero time for one
// that never expires.
func (s *SQLiteStore) expiry(exp sql.NullString) time.Time {
	if !exp.Valid {
		return time.Time{}
	}
	t, ok := parseSQLiteTime(exp.String, s.loc)
	if !ok {
		return time.Time{}
	}
	return t
}

// MarkUntil marks each keys[i] until expires[i], in one transaction, keeping
// a live mark's later expiry (a mark that never expires stays so) and
// dropping claims, and returns how many keys had a live mark. It implements
// [BulkMarker].
func (s *SQLiteStore) MarkUntil(ctx context.Context, keys []Key, expires []time.Time) (int, error) {
	if len(keys) != len(expires) {
		return 0, fmt.Errorf("dedupe: sqlite: mark until: %d keys, %d expiries", len(keys), len(expires))
	}
	for _, k := range keys {
		if err := checkCall(ctx, s.closed.Load(), k); err != nil {
			return 0, err
		}
	}
	var present int
	err := s.submit(ctx, "mark until", fmt.Sprintf("%d keys", len(keys)), func(ctx context.Context, now time.Time) error {
		present = 0
		return s.inSavepoint(ctx, func() error {
			for i, k := range keys {
				live, err := s.markOne(ctx, k, expires[i], now)
				if err != nil {
					return err
				}
				if live {
					present++
				}
			}
			return nil
		})
	})
	return present, err
}

// markOne is one key of MarkUntil, in the writer's transaction. A live mark
// it lengthens keeps its result, whose row follows the mark's new expiry; a
// mark it replaces leaves its result behind, no longer the mark's (results
// belong to the expiry they were written with) and deleted with the rest.
func (s *SQLiteStore) markOne(ctx context.Context, k Key, until, now time.Time) (live bool, err error) {
	dkey := k.String()
	if _, err := s.stmt.claimDelete.ExecContext(ctx, dkey); err != nil {
		return false, err
	}
	var exp sql.NullString
	err = s.stmt.markGet.QueryRowContext(ctx, dkey).Scan(&exp)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return false, err
	case sqliteLive(exp, now, s.loc):
		cur := s.expiry(exp)
		if cur.IsZero() || !cur.Before(until) {
			return true, nil // it lasts as long already
		}
		live = true
	}
	untilText := formatSQLiteTime(until, s.loc)
	if live {
		_, err = s.conn.ExecContext(ctx, "UPDATE "+s.results+" SET expires_at = ? WHERE dedupe_key = ? AND expires_at = ?",
			untilText, dkey, exp.String)
		if err != nil {
			return false, err
		}
	}
	_, err = s.stmt.markUpsert.ExecContext(ctx, dkey, k.Channel, k.MessageID, formatSQLiteTime(now, s.loc), untilText)
	return live, err
}

// CountLive returns the numbers of live marks and claims and the earliest
// and latest expiry of the live marks that expire. It reads every mark, to
// parse its expiry. It implements [Counter].
func (s *SQLiteStore) CountLive(ctx context.Context) (marks, claims int64, oldest, newest time.Time, err error) {
	if s.closed.Load() {
		return 0, 0, oldest, newest, ErrClosed
	}
	now := s.now()
	err = s.retryBusy(ctx, nil, func() error {
		marks, oldest, newest = 0, time.Time{}, time.Time{}
		if s.noClaims {
			claims = 0
		} else if err := s.db.QueryRowContext(ctx, "SELECT count(*) FROM "+s.claims+" WHERE expires_at > ?", now.UnixNano()).Scan(&claims); err != nil {
			return err
		}
		rows, err := s.db.QueryContext(ctx, "SELECT expires_at FROM "+s.marks)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var exp sql.NullString
			if err := rows.Scan(&exp); err != nil {
				return err
			}
			t := s.expiry(exp)
			if !t.IsZero() && !now.Before(t) {
				continue
			}
			if marks++; t.IsZero() {
				continue
			}
			if oldest.IsZero() || t.Before(oldest) {
				oldest = t
			}
			if t.After(newest) {
				newest = t
			}
		}
		return rows.Err()
	})
	if err != nil {
		return 0, 0, time.Time{}, time.Time{}, s.fail("count", s.table, err)
	}
	return marks, claims, oldest, newest, nil
}

// Sizes returns the bytes of the store's three tables (its marks, claims and
// results) and their indexes, by table name, and of the whole database file
// as "file". It implements [Sizer].
func (s *SQLiteStore) Sizes(ctx context.Context) (map[string]int64, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	sizes := map[string]int64{}
	err := s.retryBusy(ctx, nil, func() error {
		var pages, size int64
		if err := s.db.QueryRowContext(ctx, "SELECT (SELECT page_count FROM pragma_page_count()), (SELECT page_size FROM pragma_page_size())").Scan(&pages, &size); err != nil {
			return err
		}
		sizes["file"] = pages * size
		for _, t := range []string{s.table, s.table + "_claims", s.table + "_results"} {
			var n sql.NullInt64
			err := s.db.QueryRowContext(ctx, "SELECT sum(pgsize) FROM dbstat WHERE name = ? OR name IN (SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?)", t, t).Scan(&n)
			if err != nil {
				return nil // no dbstat in this build: the file alone
			}
			sizes[t] = n.Int64
		}
		return nil
	})
	if err != nil {
		return nil, s.fail("sizes", s.table, err)
	}
	return sizes, nil
}
