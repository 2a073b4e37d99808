package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// DoTx runs fn once in effect for key: in one transaction on the store's
// database it writes key's mark and runs fn with the transaction, then
// commits, so that fn's writes to the database file and the mark commit
// together or not at all. A process killed at any instant leaves either fn's
// effects and the mark, or neither: the platform's redelivery is processed
// then, and never twice. It returns [ErrDuplicate] when the key is marked (by
// this store or NekoBot) and [ErrInFlight] when a claim of [Deduper.Do] holds
// it, without running fn; fn's error, after rolling back; or the commit's.
//
// SQLite has one writer at a time: the transaction takes the database's write
// lock before it reads, and holds it until it ends, so the store's other
// writes (and other processes') wait for fn. Keep fn short, well within
// [SQLiteConfig].BusyTimeout. fn must write through tx only, and do nothing
// outside the database that must not happen twice.
func (s *SQLiteStore) DoTx(ctx context.Context, key Key, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return err
	}
	if s.readOnly {
		return fmt.Errorf("dedupe: sqlite: do in transaction %s: %w", key, ErrReadOnly)
	}
	dkey := key.String()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return s.fail("do in transaction", dkey, err)
	}
	committed := false
	defer func() {
		if !committed { // an error, a panic going on, or a failed commit
			_ = tx.Rollback()
		}
	}()
	switch status, err := s.markTx(ctx, tx, key); {
	case err != nil:
		return err
	case status == Duplicate:
		return ErrDuplicate
	case status == InFlight:
		return ErrInFlight
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return s.fail("commit", dkey, err)
	}
	committed = true
	return nil
}

// markTx writes key's mark in tx unless a live mark or claim holds it. Its
// first statement writes (dropping an expired claim of key), so that tx holds
// the write lock before it reads: a read first could see a snapshot that
// another writer outdates before tx writes.
func (s *SQLiteStore) markTx(ctx context.Context, tx *sql.Tx, key Key) (Status, error) {
	dkey, now := key.String(), s.now()
	err := s.retryBusy(ctx, nil, func() error {
		_, err := tx.ExecContext(ctx, "DELETE FROM "+s.claims+" WHERE dedupe_key = ? AND expires_at <= ?", dkey, now.UnixNano())
		return err
	})
	if err != nil {
		return 0, s.fail("do in transaction", dkey, err)
	}
	var exp sql.NullString
	err = tx.QueryRowContext(ctx, s.markGetSQL(), dkey).Scan(&exp)
	switch {
	case err == nil && sqliteLive(exp, now, s.loc):
		return Duplicate, nil
	case err != nil && !errors.Is(err, sql.ErrNoRows):
		return 0, s.fail("do in transaction", dkey, err)
	}
	var claims int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+s.claims+" WHERE dedupe_key = ?", dkey).Scan(&claims); err != nil {
		return 0, s.fail("do in transaction", dkey, err)
	}
	if claims > 0 {
		return InFlight, nil
	}
	created, expires := formatSQLiteTime(now, s.loc), formatSQLiteTime(now.Add(s.ttl), s.loc)
	_, err = tx.ExecContext(ctx, s.markUpsertSQL(), dkey, key.Channel, key.MessageID, created, expires)
	if err != nil {
		return 0, s.fail("do in transaction", dkey, err)
	}
	return Claimed, nil
}

// MarkResultTx is [SQLiteStore.MarkResult] written in the caller's
// transaction tx on the store's database: it replaces key's mark and result
// and clears any claim on key, visible to the store once tx commits and gone
// if it rolls back. Package reply uses it to record a message's replies in
// the transaction that commits the message's effect (reply.IntendTx). tx
// holds SQLite's write lock from its first write until it ends, as in DoTx.
func (s *SQLiteStore) MarkResultTx(ctx context.Context, tx *sql.Tx, key Key, result []byte, ttl time.Duration) error {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return err
	}
	if err := checkResult(s.Backend(), key, result); err != nil {
		return err
	}
	if s.readOnly {
		return fmt.Errorf("dedupe: sqlite: mark in transaction %s: %w", key, ErrReadOnly)
	}
	if tx == nil {
		return fmt.Errorf("dedupe: sqlite: mark in transaction %s: nil transaction", key)
	}
	dkey, now := key.String(), s.now()
	ttl = orDefault(ttl, s.ttl)
	created, expires := formatSQLiteTime(now, s.loc), formatSQLiteTime(now.Add(ttl), s.loc)
	err := s.retryBusy(ctx, nil, func() error {
		_, err := tx.ExecContext(ctx, "DELETE FROM "+s.claims+" WHERE dedupe_key = ?", dkey)
		return err
	})
	if err == nil {
		_, err = tx.ExecContext(ctx, s.markUpsertSQL(), dkey, key.Channel, key.MessageID, created, expires)
	}
	if err == nil && len(result) == 0 {
		_, err = tx.ExecContext(ctx, "DELETE FROM "+s.results+" WHERE dedupe_key = ?", dkey)
	} else if err == nil {
		_, err = tx.ExecContext(ctx, "INSERT INTO "+s.results+" (dedupe_key, result, expires_at) VALUES (?1, ?2, ?3) "+
			"ON CONFLICT(dedupe_key) DO UPDATE SET result = excluded.result, expires_at = excluded.expires_at", dkey, result, expires)
	}
	if err != nil {
		return s.fail("mark in transaction", dkey, err)
	}
	return nil
}
