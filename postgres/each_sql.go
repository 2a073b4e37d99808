package postgres

import "fmt"

// eachStatements are the SQL texts of the batch calls (see each.go), built
// once for a Store's table and layout. Each carries a whole batch of
// distinct keys, as arrays ($1 the keys, $2 the tokens or the results), and
// does for every key what its one-key peer does: the same conditions on
// the same rows, written as one statement over unnest of the arrays. Each
// key's rows are looked up by a subquery of its own, kept from being
// merged into a join by OFFSET 0 (or FOR UPDATE): so it is one lookup in
// the key's index, as in the one-key statement, whatever the table's
// statistics say. Merged, the planner read every live row through the
// expiry index on a table growing faster than ANALYZE ran (a batch of 64
// claims took 60 ms on 25,000 rows, and longer as it grew). A statement
// that writes takes its rows' locks in key order (its SELECT is ordered by
// key, or an ordered SELECT … FOR UPDATE takes them first), as the Store's
// own batches do, so that it never waits for one of them in a cycle.
type eachStatements struct {
	claim, extend, release, mark string
	// lock, on the partitioned layout, takes the advisory lock of every key
	// of $1, in key order, before a statement that writes them; claimLock
	// is lock for a claim, which skips the keys held and leaves the keys it
	// locked in the setting lockedKeysSetting. Both "" on the plain table.
	lock, claimLock string
}

// lockedKeysSetting is the setting, local to the transaction, in which the
// lock statement of a batch of claims leaves the keys it locked, as a text
// array.
const lockedKeysSetting = "dedupe.locked_keys"

// eachInput is the CTE of the items of a batch of claims, releases or
// extensions: key k and token tok.
const eachInput = `inp AS (SELECT k, tok FROM unnest($1::text[], $2::text[]) AS u(k, tok))`

// buildEach returns the batch statements of the plain table t.
func buildEach(t string) eachStatements {
	return eachStatements{
		claim:   claimEachSQL(t),
		extend:  extendEachSQL(t),
		release: releaseEachSQL(t),
		// The ORDER BY makes the upsert lock the rows in key order.
		mark: `INSERT INTO ` + t + ` AS d (key, token, expires_at, result)
SELECT k, NULL, ` + fmt.Sprintf(after, "$2") + `, r FROM unnest($1::text[], $3::bytea[]) AS u(k, r) ORDER BY k
ON CONFLICT (key) DO UPDATE SET token = NULL, expires_at = excluded.expires_at, result = excluded.result`,
	}
}

// claimEachSQL is claimSQL for a batch: cur holds the live rows that make a
// key's outcome Duplicate or InFlight without a write (each found through
// the key's index), and ins takes the other keys, in key order, with the
// upsert of claimSQL. It returns each key with its outcome; a key the
// upsert skipped (a row committed after the snapshot) has no row, and is
// sent again, as Claim sends its statement again.
func claimEachSQL(t string) string {
	return `WITH ` + eachInput + `, cur AS (
	SELECT inp.k, c.marked FROM inp CROSS JOIN LATERAL (
		SELECT token IS NULL AS marked FROM ` + t + `
		WHERE key = inp.k AND expires_at > now() AND ` + heldBy("inp.tok") + ` OFFSET 0) c
), ins AS (
	INSERT INTO ` + t + ` AS d (key, token, expires_at)
	SELECT k, tok, ` + fmt.Sprintf(after, "$3") + ` FROM inp
	WHERE NOT EXISTS (SELECT 1 FROM cur WHERE cur.k = inp.k)
	ORDER BY k
	` + claimConflict + `
	RETURNING d.key
)
SELECT key, 1 FROM ins
UNION ALL
SELECT k, CASE WHEN marked THEN 2 ELSE 3 END FROM cur`
}

// extendEachSQL is the extend statement for a batch, on both layouts: lk
// locks the rows the callers hold, in key order (u is sorted, and each
// key's row locked in turn), which rechecks them on their latest version,
// and the UPDATE renews them. It returns the keys renewed.
func extendEachSQL(t string) string {
	return `WITH lk AS (
	SELECT d.key FROM (SELECT k, tok FROM unnest($1::text[], $2::text[]) AS u(k, tok) ORDER BY k) u
	CROSS JOIN LATERAL (
		SELECT key FROM ` + t + ` WHERE key = u.k AND split_part(token, ' ', 1) = u.tok AND expires_at > now()
		FOR UPDATE) d
)
UPDATE ` + t + ` SET expires_at = ` + fmt.Sprintf(after, "$3") + `
WHERE key = ANY (ARRAY(SELECT key FROM lk))
RETURNING key`
}

// releaseEachSQL is releaseSQL for a batch, the upsert in key order: old
// lists the keys the callers held when the statement began.
func releaseEachSQL(t string) string {
	return `WITH ` + eachInput + `, old AS (
	SELECT k FROM inp WHERE EXISTS (SELECT 1 FROM ` + t + `
		WHERE key = inp.k AND expires_at > now() AND split_part(token, ' ', 1) = inp.tok OFFSET 0)
), up AS (
	INSERT INTO ` + t + ` AS d (key, token, expires_at)
	SELECT k, ' ' || tok, ` + fmt.Sprintf(after, "$3") + ` FROM inp ORDER BY k
	` + releaseConflict("substr(excluded.token, 2)") + `
)
SELECT k FROM old`
}

// partEach returns the batch statements of the partitioned layout on its
// table t. As the one-key statements of partition_sql.go, each writes
// after the lock statement, in the same transaction, which takes the locks
// of the keys in key order: the ordered subquery is the form PostgreSQL's
// documentation gives for taking advisory locks over many rows
// (https://www.postgresql.org/docs/current/explicit-locking.html#ADVISORY-LOCKS).
func (pt *partitions) partEach(t string) eachStatements {
	lockFn := fmt.Sprintf(`pg_advisory_xact_lock(hashtextextended(q.k, %d))`, pt.oid)
	return eachStatements{
		lock: `SELECT count(*)::int FROM (SELECT ` + lockFn + ` FROM (
	SELECT k FROM unnest($1::text[]) AS k ORDER BY k) q) l`,
		claimLock: `SELECT set_config('` + lockedKeysSetting + `', coalesce(array_agg(l.k)::text, '{}'), true)
FROM (SELECT q.k, ` + lockFn + ` FROM (
	SELECT u.k FROM unnest($1::text[], $2::text[]) AS u(k, tok)
	WHERE NOT EXISTS (SELECT 1 FROM ` + t + ` WHERE key = u.k AND expires_at > now() AND ` + heldBy("u.tok") + ` OFFSET 0)
	ORDER BY u.k) q) l`,
		claim:   partClaimEachSQL(t),
		extend:  extendEachSQL(t),
		release: partReleaseEachSQL(t),
		mark: `WITH gone AS (DELETE FROM ` + t + ` WHERE key = ANY ($1::text[]))
INSERT INTO ` + t + ` (key, token, expires_at, result)
SELECT k, NULL, ` + fmt.Sprintf(after, "$2") + `, r FROM unnest($1::text[], $3::bytea[]) AS u(k, r)`,
	}
}

// partClaimEachSQL is partClaimSQL for a batch: held are the keys whose
// live row (cur) makes the outcome, w the keys locked by the claimLock
// statement (locked, read once from the setting) and not held, whose rows
// are replaced by the callers' claims. Every CTE is joined by key, never
// looked up per row, so that a batch of n keys costs O(n), not O(n²).
func partClaimEachSQL(t string) string {
	return `WITH ` + eachInput + `, cur AS (
	SELECT inp.k, inp.tok, c.token FROM inp CROSS JOIN LATERAL (
		SELECT token FROM ` + t + ` WHERE key = inp.k AND expires_at > now() OFFSET 0) c
), held AS (
	SELECT k, token IS NULL AS marked FROM cur WHERE ` + heldBy("tok") + `
), locked AS (
	SELECT unnest(coalesce(nullif(current_setting('` + lockedKeysSetting + `', true), ''), '{}')::text[]) AS k
), w AS (
	SELECT inp.k, inp.tok, cur.token FROM inp JOIN locked ON locked.k = inp.k LEFT JOIN cur ON cur.k = inp.k
	WHERE NOT EXISTS (SELECT 1 FROM held WHERE held.k = inp.k)
), gone AS (
	DELETE FROM ` + t + ` WHERE key = ANY (ARRAY(SELECT k FROM w))
), ins AS (
	INSERT INTO ` + t + ` (key, token, expires_at)
	SELECT k, CASE WHEN token IS NULL THEN tok WHEN left(token, 1) = ' ' THEN tok || token ELSE token END,
		` + fmt.Sprintf(after, "$3") + ` FROM w
	RETURNING key
)
SELECT key, 1 FROM ins
UNION ALL
SELECT k, CASE WHEN marked THEN 2 ELSE 3 END FROM held`
}

// partReleaseEachSQL is partReleaseSQL for a batch: the rows of every key
// whose live row is not a mark (w) are replaced by one holding the fences.
func partReleaseEachSQL(t string) string {
	return `WITH ` + eachInput + `, cur AS (
	SELECT inp.k, c.token, c.expires_at FROM inp CROSS JOIN LATERAL (
		SELECT token, expires_at FROM ` + t + ` WHERE key = inp.k AND expires_at > now() OFFSET 0) c
), old AS (
	SELECT cur.k FROM cur JOIN inp ON inp.k = cur.k WHERE split_part(cur.token, ' ', 1) = inp.tok
), w AS (
	SELECT inp.k, inp.tok, c.token, c.expires_at FROM inp LEFT JOIN cur c ON c.k = inp.k
	WHERE c.k IS NULL OR c.token IS NOT NULL
), gone AS (
	DELETE FROM ` + t + ` WHERE key = ANY (ARRAY(SELECT k FROM w))
), ins AS (
	INSERT INTO ` + t + ` (key, token, expires_at)
	SELECT k,
		CASE WHEN token IS NULL THEN ' ' || tok ELSE ` + keptFences("token", "tok") + ` || ' ' || tok END,
		CASE WHEN token IS NOT NULL AND split_part(token, ' ', 1) NOT IN ('', tok)
			THEN expires_at ELSE ` + fmt.Sprintf(after, "$3") + ` END
	FROM w
)
SELECT k FROM old`
}
