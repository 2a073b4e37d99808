package postgres

import (
	"context"
	"fmt"

	"github.com/gatewaykit/dedupe"
)

// Outcomes of the forget statement.
const (
	forgetAbsent = 0
	forgetDone   = 1
	forgetHeld   = 2
)

// forgetSQL returns the forget statement on table t, of either layout.
//
// gone deletes the key's mark (live or expired), and its result, which is
// in the row: only a row whose token is NULL. A claim committed
// meanwhile is never deleted: on the plain table the DELETE waits for the
// row lock of a concurrent writer and checks its condition again on the
// row that writer left (EvalPlanQual); on the partitioned layout the
// statement runs under the key's lock, as every writer does, so none
// commits meanwhile. held is the key's live claim in the statement's
// snapshot (a row of fences only is no claim). The outcome is forgetDone
// for a live mark deleted, forgetHeld for a live claim, and forgetAbsent
// otherwise.
func forgetSQL(t string) string {
	return `WITH gone AS (
	DELETE FROM ` + t + ` WHERE key = $1::text AND token IS NULL RETURNING expires_at > now() AS live
), held AS (
	SELECT 1 FROM ` + t + ` WHERE key = $1::text AND expires_at > now() AND split_part(token, ' ', 1) <> ''
)
SELECT CASE WHEN EXISTS (SELECT 1 FROM gone WHERE live) THEN 1
	WHEN EXISTS (SELECT 1 FROM held) AND NOT EXISTS (SELECT 1 FROM gone) THEN 2
	ELSE 0 END`
}

// Forget drops key's mark and the result kept with it unless a live claim
// holds key; see [dedupe.Forgetter]. It is one statement (on the
// partitioned layout preceded by the key's lock statement), batched as
// Mark is; see forgetSQL for why a claim committed meanwhile is never
// dropped. A store opened with [Config.ReadOnly] refuses it with
// [dedupe.ErrReadOnly]. When Forget returns an error the mark may or may
// not have been dropped; a Forget again is harmless.
func (s *Store) Forget(ctx context.Context, key dedupe.Key) (bool, error) {
	if err := s.check(ctx, "forget", key); err != nil {
		return false, err
	}
	k := key.String()
	var outcome int
	err := s.do(ctx, k, s.lease, lockOf(s.sql.lock, k), func(p *pgBatch) func() error {
		p.Queue(s.sql.forget, k)
		return func() error { return p.results.QueryRow().Scan(&outcome) }
	})
	switch {
	case err != nil:
		return false, s.fail(ctx, "forget", key, err)
	case outcome == forgetHeld:
		return false, fmt.Errorf("dedupe: postgres: forget %s: %w", key, dedupe.ErrInFlight)
	}
	return outcome == forgetDone, nil
}
