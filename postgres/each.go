package postgres

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatewaykit/dedupe"
)

// The batch calls of a Store ([dedupe.BatchStore]): each sends its items
// as arrays in one statement (eachStatements, each_sql.go), one round trip
// and one transaction, on a connection of the pool, beside the Store's
// batches of one-key calls rather than in them: a statement over many keys
// in a batch of one-key statements sorted by key could take its locks out
// of that order. On the partitioned layout the statement follows its keys'
// lock statement, in the same round trip, as a one-key write does.
//
// Items on one key are applied in their order by sending them in separate
// round trips: a batch is cut before the first item whose key it already
// holds (and after maxEach items), and the runs are sent one after the
// other. A batch of distinct keys, the [dedupe.Deduper]'s, is one round
// trip per maxEach items.

// maxEach is the most items that one statement of a batch call carries.
const maxEach = 1000

var _ dedupe.BatchStore = (*Store)(nil)

// ClaimEach is [Store.Claim] for each claims[i], for lease (lease <= 0:
// [Config.Lease]), in one statement per round trip; see
// [dedupe.BatchStore]. An item whose key was written by a concurrent
// writer after the statement's snapshot is sent again, as Claim sends its
// statement again. After an error an item may have been claimed all the
// same: claim again with the same claims, or release them.
func (s *Store) ClaimEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) ([]dedupe.Status, []error) {
	sts, errs := make([]dedupe.Status, len(claims)), make([]error, len(claims))
	if lease <= 0 {
		lease = s.lease
	}
	keys, valid := make([]string, len(claims)), make([]int, 0, len(claims))
	for i, c := range claims {
		if errs[i] = s.check(ctx, "claim", c.Key); errs[i] == nil {
			errs[i] = c.Validate()
		}
		if errs[i] == nil {
			keys[i], valid = c.Key.String(), append(valid, i)
		}
	}
	for _, seg := range segments(keys, valid) {
		s.claimRun(ctx, claims, keys, seg, lease, sts, errs)
	}
	return sts, errs
}

// claimRun claims the items seg of ClaimEach, of distinct keys, sending
// again those that got no outcome, up to maxClaimTrials times.
func (s *Store) claimRun(ctx context.Context, claims []dedupe.Claim, keys []string, seg []int, lease time.Duration, sts []dedupe.Status, errs []error) {
	key := func(i int) dedupe.Key { return claims[i].Key }
	got := make(map[string]int, len(seg))
	for range maxClaimTrials {
		ks, toks := texts(keys, seg), make([]string, len(seg))
		for j, i := range seg {
			toks[j] = claims[i].Token
		}
		err := s.eachTrip(ctx, lease, s.each.claimLock, []any{ks, toks}, s.each.claim, []any{ks, toks, micros(lease)},
			func(rows pgx.Rows) error {
				clear(got)
				var k string
				var outcome int
				_, err := pgx.ForEachRow(rows, []any{&k, &outcome}, func() error { got[k] = outcome; return nil })
				return err
			})
		if err != nil {
			s.eachFailed(ctx, "claim", key, seg, err, errs, func(i int) (err error) {
				sts[i], err = s.Claim(ctx, claims[i], lease)
				return err
			})
			return
		}
		rest := seg[:0:0]
		for _, i := range seg {
			switch outcome := got[keys[i]]; outcome {
			case claimInserted:
				sts[i] = dedupe.Claimed
			case claimMarked:
				sts[i] = dedupe.Duplicate
			case claimHeld:
				sts[i] = dedupe.InFlight
			case 0:
				rest = append(rest, i)
			default:
				errs[i] = fmt.Errorf("dedupe: postgres: claim %s: unexpected outcome %d", claims[i].Key, outcome)
			}
		}
		if seg = rest; len(seg) == 0 {
			return
		}
		s.log.Debug(msgClaimAgain, "table", s.table, "keys", len(seg))
		if err := ctx.Err(); err != nil {
			for _, i := range seg {
				errs[i] = s.fail(ctx, "claim", claims[i].Key, err)
			}
			return
		}
	}
	for _, i := range seg {
		errs[i] = fmt.Errorf("dedupe: postgres: claim %s: no stable outcome after %d attempts under concurrent writes", claims[i].Key, maxClaimTrials)
	}
}

// ExtendEach is [Store.Extend] for each claims[i], for lease (lease <= 0:
// [Config.Lease]), in one statement per round trip; see
// [dedupe.BatchStore].
func (s *Store) ExtendEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) []error {
	if lease <= 0 {
		lease = s.lease
	}
	return s.heldEach(ctx, "extend", claims, lease, s.each.extend, func(c dedupe.Claim) error {
		return s.Extend(ctx, c, lease)
	})
}

// ReleaseEach is [Store.Release] for each claims[i], in one statement per
// round trip; see [dedupe.BatchStore]. As Release, it fences every token
// it is given for the store's lease.
func (s *Store) ReleaseEach(ctx context.Context, claims []dedupe.Claim) []error {
	return s.heldEach(ctx, "release", claims, s.lease, s.each.release, func(c dedupe.Claim) error {
		return s.Release(ctx, c)
	})
}

// heldEach runs a batch of Extend or Release, op, with statement sql,
// which writes expiries up to d from now and returns the keys whose claim
// the caller held: the other items are refused with [dedupe.ErrNotOwner].
// one is the one-key call, for the items of a statement the server refused.
func (s *Store) heldEach(ctx context.Context, op string, claims []dedupe.Claim, d time.Duration, sql string, one func(dedupe.Claim) error) []error {
	errs := make([]error, len(claims))
	keys, valid := make([]string, len(claims)), make([]int, 0, len(claims))
	for i, c := range claims {
		if errs[i] = s.checkClaim(ctx, op, c); errs[i] == nil {
			keys[i], valid = c.Key.String(), append(valid, i)
		}
	}
	key := func(i int) dedupe.Key { return claims[i].Key }
	held := make(map[string]bool)
	for _, seg := range segments(keys, valid) {
		ks, toks := texts(keys, seg), make([]string, len(seg))
		for j, i := range seg {
			toks[j] = claims[i].Token
		}
		err := s.eachTrip(ctx, d, s.each.lock, []any{ks}, sql, []any{ks, toks, micros(d)}, func(rows pgx.Rows) error {
			clear(held)
			var k string
			_, err := pgx.ForEachRow(rows, []any{&k}, func() error { held[k] = true; return nil })
			return err
		})
		if err != nil {
			s.eachFailed(ctx, op, key, seg, err, errs, func(i int) error { return one(claims[i]) })
			continue
		}
		for _, i := range seg {
			if !held[keys[i]] {
				errs[i] = fmt.Errorf("dedupe: postgres: %s %s: %w", op, claims[i].Key, dedupe.ErrNotOwner)
			}
		}
	}
	return errs
}

// MarkEach is [Store.MarkResult] for each keys[i] with results[i], and
// [Store.Mark] where results is nil or results[i] is empty, for ttl (ttl
// <= 0: [Config.TTL]), in one statement per round trip; see
// [dedupe.BatchStore]. As Mark, after an error an item may have been
// marked all the same: marking again is harmless.
func (s *Store) MarkEach(ctx context.Context, keys []dedupe.Key, results [][]byte, ttl time.Duration) []error {
	errs := make([]error, len(keys))
	if results != nil && len(results) != len(keys) {
		for i, k := range keys {
			errs[i] = fmt.Errorf("dedupe: postgres: mark %s: %w: %d results for %d keys", k, dedupe.ErrInvalidKey, len(results), len(keys))
		}
		return errs
	}
	if ttl <= 0 {
		ttl = s.ttl
	}
	result := func(i int) []byte {
		if results == nil || len(results[i]) == 0 {
			return nil // kept as none (NULL)
		}
		return results[i]
	}
	names, valid := make([]string, len(keys)), make([]int, 0, len(keys))
	for i, k := range keys {
		if errs[i] = s.check(ctx, "mark", k); errs[i] == nil {
			errs[i] = checkResult(k, result(i))
		}
		if errs[i] == nil {
			names[i], valid = k.String(), append(valid, i)
		}
	}
	key := func(i int) dedupe.Key { return keys[i] }
	for _, seg := range segments(names, valid) {
		ks, rs := texts(names, seg), make([][]byte, len(seg))
		for j, i := range seg {
			rs[j] = result(i)
		}
		err := s.eachTrip(ctx, ttl, s.each.lock, []any{ks}, s.each.mark, []any{ks, micros(ttl), rs}, func(rows pgx.Rows) error {
			_, err := pgx.ForEachRow(rows, nil, func() error { return nil })
			return err
		})
		if err != nil {
			s.eachFailed(ctx, "mark", key, seg, err, errs, func(i int) error { return s.mark(ctx, keys[i], result(i), ttl) })
		}
	}
	return errs
}

// segments cuts the items idx (indexes of keys, in their order) into runs
// of at most maxEach items of distinct keys: a run ends before the first
// item whose key it holds already.
func segments(keys []string, idx []int) [][]int {
	var runs [][]int
	seen := make(map[string]struct{}, min(len(idx), maxEach))
	start := 0
	for j, i := range idx {
		if _, again := seen[keys[i]]; again || j-start == maxEach {
			runs = append(runs, idx[start:j:j])
			start = j
			clear(seen)
		}
		seen[keys[i]] = struct{}{}
	}
	if start < len(idx) {
		runs = append(runs, idx[start:])
	}
	return runs
}

// texts returns keys[i] for each i of seg.
func texts(keys []string, seg []int) []string {
	ks := make([]string, len(seg))
	for j, i := range seg {
		ks[j] = keys[i]
	}
	return ks
}

// eachTrip sends the statement sql with args in one round trip and one
// transaction, after the lock statement lock with lockArgs unless lock is
// "" (the plain layout), and reads the statement's rows with read. If an
// expiry it writes, at most d from now, has no partition yet, it creates
// the partitions up to d ahead and sends it again, once, as [Store.do]
// does for a one-key write.
func (s *Store) eachTrip(ctx context.Context, d time.Duration, lock string, lockArgs []any, sql string, args []any, read func(pgx.Rows) error) error {
	err := s.sendEach(ctx, lock, lockArgs, sql, args, read)
	if s.part == nil || !noPartition(err) {
		return err
	}
	if err := s.part.add(ctx, s.pool, d); err != nil {
		return err
	}
	return s.sendEach(ctx, lock, lockArgs, sql, args, read)
}

// sendEach is one round trip of eachTrip.
func (s *Store) sendEach(ctx context.Context, lock string, lockArgs []any, sql string, args []any, read func(pgx.Rows) error) error {
	b := &pgx.Batch{}
	if lock != "" {
		b.Queue(lock, lockArgs...)
	}
	b.Queue(sql, args...)
	br := s.pool.SendBatch(ctx, b)
	err := func() error {
		if lock != "" {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		rows, err := br.Query()
		if err != nil {
			return err
		}
		return read(rows) // pgx.ForEachRow closes rows and returns their error
	}()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// eachFailed settles the items seg of a batch call op whose round trip
// failed with err. A statement the server refused was rolled back, and
// nothing of it written: its items are then sent again by one, each as
// its one-key call (one), at once, so that only an item at fault fails,
// as in the Store's batches of one-key calls. Any other error (the
// connection, the context) may have come after the commit: it is every
// item's.
func (s *Store) eachFailed(ctx context.Context, op string, key func(i int) dedupe.Key, seg []int, err error, errs []error, one func(i int) error) {
	if len(seg) == 1 || !rolledBack(err) {
		for _, i := range seg {
			errs[i] = s.fail(ctx, op, key(i), err)
		}
		return
	}
	s.log.Debug(msgOneByOne, "table", s.table, "calls", len(seg), "error", err)
	var wg sync.WaitGroup
	for _, i := range seg {
		wg.Go(func() { errs[i] = one(i) })
	}
	wg.Wait()
}
