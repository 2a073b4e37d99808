package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatewaykit/dedupe"
)

// markTxSQL writes key's mark in the caller's transaction, unless a live mark
// or a live claim holds the key: an expired row, or one holding only the
// fences of released tokens, is taken over. Against a concurrent transaction
// that wrote the key and has not ended, the INSERT waits for it, and then
// sees its outcome: of concurrent MarkTx calls of one key, one writes.
func markTxSQL(t string) string {
	return `INSERT INTO ` + t + ` AS d (key, token, expires_at) VALUES ($1, NULL, ` + fmt.Sprintf(after, "$2") + `)
ON CONFLICT (key) DO UPDATE SET token = NULL, expires_at = excluded.expires_at, result = NULL
WHERE d.expires_at <= now() OR split_part(d.token, ' ', 1) = ''
RETURNING 1`
}

// heldSQL tells a live mark (true) from a live claim (false).
func heldSQL(t string) string {
	return `SELECT token IS NULL FROM ` + t + ` WHERE key = $1 AND expires_at > now()`
}

// MarkTx writes key's mark, for ttl (<= 0: [Config.TTL]), in the caller's
// transaction tx on the store's database, so that it commits or rolls back
// with the effects tx writes: a message is then processed exactly once in
// effect, even if the process dies at any instant. It returns
// [dedupe.Claimed] when tx now holds the mark (go on and write the effects,
// then commit), [dedupe.Duplicate] when the key is marked, and
// [dedupe.InFlight] when a claim of [dedupe.Deduper.Do] holds it; for those
// two, write nothing and roll back or go on as the caller's logic wants.
//
// Until tx ends, the key's row is locked: a concurrent MarkTx, Claim or Mark
// of the same key waits for tx to commit (and then finds the key marked) or to
// roll back (and then takes it). tx must use the READ COMMITTED isolation
// level (PostgreSQL's default): under REPEATABLE READ or SERIALIZABLE a
// concurrent commit makes the statement fail with a serialization error.
// The store's table may live in any schema of that database; tx's own tables
// too. On the partitioned layout, a mark whose expiry has no partition yet (a
// ttl longer than the partitions created ahead) fails tx; MarkTx creates the
// partitions meanwhile, so that the transaction run again succeeds, as DoTx
// does.
func (s *Store) MarkTx(ctx context.Context, tx pgx.Tx, key dedupe.Key, ttl time.Duration) (dedupe.Status, error) {
	if err := s.check(ctx, "mark in transaction", key); err != nil {
		return 0, err
	}
	if tx == nil {
		return 0, errors.New("dedupe: postgres: mark in transaction: nil transaction")
	}
	if ttl <= 0 {
		ttl = s.ttl
	}
	k := key.String()
	if s.sql.lock != "" {
		if _, err := tx.Exec(ctx, s.sql.lock, k); err != nil {
			return 0, s.fail(ctx, "mark in transaction", key, err)
		}
	}
	for range maxClaimTrials {
		tag, err := tx.Exec(ctx, s.sql.markTx, k, micros(ttl))
		if err != nil {
			return 0, s.failTx(ctx, key, ttl, err)
		}
		if tag.RowsAffected() == 1 {
			return dedupe.Claimed, nil
		}
		var marked bool
		switch err := tx.QueryRow(ctx, s.sql.held, k).Scan(&marked); {
		case isNoRows(err):
			continue // the holder expired or went meanwhile: try again
		case err != nil:
			return 0, s.fail(ctx, "mark in transaction", key, err)
		case marked:
			return dedupe.Duplicate, nil
		default:
			return dedupe.InFlight, nil
		}
	}
	return 0, fmt.Errorf("dedupe: postgres: mark in transaction %s: the key changed hands %d times in a row", key, maxClaimTrials)
}

// failTx is fail for MarkTx. On the partitioned layout, if the mark's
// expiry had no partition, it creates the missing partitions (the caller's
// transaction has failed, and another one can then write the mark).
func (s *Store) failTx(ctx context.Context, key dedupe.Key, ttl time.Duration, err error) error {
	if s.part != nil && noPartition(err) {
		if aerr := s.part.add(ctx, s.pool, ttl); aerr != nil {
			err = fmt.Errorf("%w; %w", err, aerr)
		}
	}
	return s.fail(ctx, "mark in transaction", key, err)
}

// DoTx runs fn once in effect for key: in one transaction of the store's
// pool it writes key's mark ([Store.MarkTx]), runs fn with the transaction,
// and commits, so that fn's statements and the mark commit together or not
// at all. It returns [dedupe.ErrDuplicate] or [dedupe.ErrInFlight] without
// running fn, as [dedupe.Deduper.Do] does; fn's error, after rolling back; or
// the commit's error. A process killed at any instant leaves either fn's
// effects and the mark, or neither: the platform's redelivery is processed
// then, and never twice. fn must write its effects through tx only, and do
// nothing outside the database that must not happen twice (a reply sent
// before a failed commit is sent again on redelivery).
//
// If the commit's reply is lost (the connection failed during COMMIT), DoTx
// returns the error and it is unknown whether the transaction committed: a
// redelivery then finds the key marked, or runs fn again in a new transaction;
// either way the effects are applied once.
func (s *Store) DoTx(ctx context.Context, key dedupe.Key, fn func(ctx context.Context, tx pgx.Tx) error) error {
	_, err := s.doTx(ctx, key, func(ctx context.Context, tx pgx.Tx) ([]byte, error) { return nil, fn(ctx, tx) })
	return err
}

// DoResultTx is [Store.DoTx] for a function with a result, which is kept
// with key's mark, written in the same transaction after fn returns, so that
// the mark, the result and fn's effects commit together. A copy of the key,
// in DoResultTx or in [dedupe.Deduper.DoResult] on this store, gets the
// result with [dedupe.ErrDuplicate], as DoResult's copies do; it is nil if
// the result was empty or longer than [dedupe.MaxResultSize] (the key is
// then marked without it, and the store's Logger warned). When fn runs,
// DoResultTx returns what fn returned, with DoTx's error.
func (s *Store) DoResultTx(ctx context.Context, key dedupe.Key, fn func(ctx context.Context, tx pgx.Tx) ([]byte, error)) ([]byte, error) {
	return s.doTx(ctx, key, fn)
}

// doTx is DoResultTx. On the partitioned layout, if the mark's expiry had no
// partition, which MarkTx then created, it runs the transaction again, once.
func (s *Store) doTx(ctx context.Context, key dedupe.Key, fn func(ctx context.Context, tx pgx.Tx) ([]byte, error)) ([]byte, error) {
	res, again, err := s.doTxOnce(ctx, key, fn)
	if again {
		res, _, err = s.doTxOnce(ctx, key, fn)
	}
	return res, err
}

// doTxOnce is doTx, once; again reports that MarkTx failed for want of a
// partition, which it created, so that fn did not run and may run in a new
// transaction.
func (s *Store) doTxOnce(ctx context.Context, key dedupe.Key, fn func(ctx context.Context, tx pgx.Tx) ([]byte, error)) (res []byte, again bool, err error) {
	if err := s.check(ctx, "do in transaction", key); err != nil {
		return nil, false, err
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, false, s.fail(ctx, "do in transaction", key, err)
	}
	committed := false
	defer func() {
		if !committed { // an error, a panic going on, or a failed commit
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	switch status, err := s.MarkTx(ctx, tx, key, 0); {
	case err != nil:
		return nil, s.part != nil && noPartition(err), err
	case status == dedupe.Duplicate:
		_ = tx.Rollback(ctx)
		res, _, err := s.Result(ctx, key)
		if err != nil {
			s.log.Warn("dedupe: postgres: result of a duplicate unreadable", "table", s.table, "key", key.String(), "error", err)
		}
		return res, false, dedupe.ErrDuplicate
	case status == dedupe.InFlight:
		return nil, false, dedupe.ErrInFlight
	}
	if res, err = fn(ctx, tx); err != nil {
		return res, false, err
	}
	if err := s.keepResult(ctx, tx, key, res); err != nil {
		return res, false, err
	}
	if err := tx.Commit(ctx); err != nil {
		return res, false, s.fail(ctx, "commit", key, err)
	}
	committed = true
	return res, false, nil
}

// keepResult writes res with the mark tx holds on key, unless it is empty
// or too long to keep.
func (s *Store) keepResult(ctx context.Context, tx pgx.Tx, key dedupe.Key, res []byte) error {
	if len(res) == 0 {
		return nil
	}
	if err := checkResult(key, res); err != nil {
		s.log.Warn("dedupe: postgres: result not kept: longer than MaxResultSize", "table", s.table, "key", key.String(), "error", err)
		return nil
	}
	if _, err := tx.Exec(ctx, s.sql.keepResult, key.String(), res); err != nil {
		return s.fail(ctx, "keep result in transaction", key, err)
	}
	return nil
}

// MarkResultTx is [Store.MarkResult] written in the caller's transaction tx
// on the store's database: it replaces key's mark and result (an empty
// result is kept as none) and clears any claim on key, visible once tx
// commits and gone if it rolls back. Package reply uses it to record a
// message's replies in the transaction that commits the message's effect
// (reply.IntendTx). Until tx ends, the key's row (on the partitioned layout,
// its advisory lock) is held, as in [Store.MarkTx]; on the partitioned layout
// a ttl beyond the partitions created ahead fails tx, and MarkResultTx
// creates them meanwhile, so that the transaction run again succeeds.
func (s *Store) MarkResultTx(ctx context.Context, tx pgx.Tx, key dedupe.Key, result []byte, ttl time.Duration) error {
	if err := s.check(ctx, "mark in transaction", key); err != nil {
		return err
	}
	if err := checkResult(key, result); err != nil {
		return err
	}
	if tx == nil {
		return errors.New("dedupe: postgres: mark in transaction: nil transaction")
	}
	if ttl <= 0 {
		ttl = s.ttl
	}
	if len(result) == 0 {
		result = nil
	}
	k := key.String()
	if s.sql.lock != "" {
		if _, err := tx.Exec(ctx, s.sql.lock, k); err != nil {
			return s.fail(ctx, "mark in transaction", key, err)
		}
	}
	if _, err := tx.Exec(ctx, s.sql.mark, k, micros(ttl), result); err != nil {
		return s.failTx(ctx, key, ttl, err)
	}
	return nil
}
