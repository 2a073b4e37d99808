package postgres

import "fmt"

// statements returns the statements of the partitioned layout on its table
// t (quoted as configured).
//
// A unique index of a partitioned table must include the partition key, so
// nothing in the table makes key unique, and no statement can rely on ON
// CONFLICT. Instead each statement that writes a key runs after the lock
// statement, in the same transaction (the batch's, or MarkTx's caller's):
// an advisory lock on a 64-bit hash of the key, seeded by the table's OID,
// held until the transaction ends. The writers of a key so run one at a
// time, and, under READ COMMITTED, each of their statements takes its
// snapshot after the lock, so it sees the last writer's commit. Each writer
// deletes every row of the key, live or expired, in whichever partition,
// and inserts the new one, in one statement (the sub-statements of a WITH
// share a snapshot, so the DELETE never sees the INSERT's row); Extend's
// UPDATE moves the row to its new partition. A key therefore has at most
// one row, found in exactly one partition, and a reader, whose snapshot sees
// a writer's commit entirely or not at all, finds it there or finds none.
func (pt *partitions) statements(t string) statements {
	s := buildStatements(t)
	s.lock = fmt.Sprintf(`SELECT pg_advisory_xact_lock(hashtextextended($1::text, %d))`, pt.oid)
	s.claimLock = `SELECT set_config('` + lockedSetting + `', CASE WHEN EXISTS (` + heldRowSQL(t) + `) THEN ''
	ELSE (SELECT $1::text FROM (` + s.lock + `) l) END, true)`
	s.mark = `WITH gone AS (DELETE FROM ` + t + ` WHERE key = $1::text)
INSERT INTO ` + t + ` (key, token, expires_at, result) VALUES ($1::text, NULL, ` + fmt.Sprintf(after, "$2") + `, $3)`
	s.claim = partClaimSQL(t)
	s.release = partReleaseSQL(t)
	s.markTx = `WITH cur AS (
	SELECT 1 FROM ` + t + ` WHERE key = $1::text AND expires_at > now() AND (token IS NULL OR split_part(token, ' ', 1) <> '')
), gone AS (
	DELETE FROM ` + t + ` WHERE key = $1::text AND NOT EXISTS (SELECT 1 FROM cur)
)
INSERT INTO ` + t + ` (key, token, expires_at)
SELECT $1::text, NULL, ` + fmt.Sprintf(after, "$2") + ` WHERE NOT EXISTS (SELECT 1 FROM cur)
RETURNING 1`
	s.cleanup = ""
	return s
}

// lockedSetting is the setting, local to the transaction, in which the lock
// statement of a claim leaves the key it locked, or an empty string if it
// skipped the lock.
const lockedSetting = "dedupe.locked_key"

// heldRowSQL selects the row that makes a claim of key $1 with token $2 an
// outcome without a write: a live mark, a live claim of another token, or
// one that fences the token.
func heldRowSQL(t string) string {
	return `SELECT token IS NULL AS marked FROM ` + t + `
	WHERE key = $1::text AND expires_at > now() AND ` + heldBy("$2::text")
}

// partClaimSQL is claimSQL for the partitioned layout: cur is the key's
// live row, if any, and held is it unless it is the caller's own claim
// (renewed) or holds only the fences of other tokens (taken over, keeping
// them). Without held, the key's rows are replaced by the caller's claim,
// under the key's lock. The outcomes are claimSQL's.
//
// The claim's lock statement (claimLock) skips the lock if it finds the key
// held (heldRowSQL), so that copies of a processed or in-flight message, the
// claims that write nothing, wait for no lock and no other writer of the
// key, as on the plain table. It leaves the key it locked, or an empty
// string, in a setting local to the transaction (lockedSetting), and the
// claim writes only under the lock. If the lock was skipped but the holder has gone by
// the claim's snapshot, no row is returned, and Claim runs both again, as
// it does on the plain table after a race.
func partClaimSQL(t string) string {
	return `WITH cur AS (
	SELECT token FROM ` + t + ` WHERE key = $1::text AND expires_at > now()
), held AS (
	SELECT token IS NULL AS marked FROM cur WHERE ` + heldBy("$2::text") + `
), locked AS (
	SELECT 1 WHERE current_setting('` + lockedSetting + `', true) = $1::text
), gone AS (
	DELETE FROM ` + t + ` WHERE key = $1::text AND NOT EXISTS (SELECT 1 FROM held) AND EXISTS (SELECT 1 FROM locked)
), ins AS (
	INSERT INTO ` + t + ` (key, token, expires_at)
	SELECT $1::text, CASE WHEN c.token IS NULL THEN $2::text
			WHEN left(c.token, 1) = ' ' THEN $2::text || c.token
			ELSE c.token END, ` + fmt.Sprintf(after, "$3") + `
	FROM (SELECT (SELECT token FROM cur) AS token) c
	WHERE NOT EXISTS (SELECT 1 FROM held) AND EXISTS (SELECT 1 FROM locked)
	RETURNING 1
)
SELECT 1 FROM ins
UNION ALL
SELECT CASE WHEN marked THEN 2 ELSE 3 END FROM held`
}

// partReleaseSQL is releaseSQL for the partitioned layout, under the key's
// lock: unless the key's live row is a mark, its rows are replaced by one
// holding the fences, as releaseSQL's upsert writes it.
func partReleaseSQL(t string) string {
	return `WITH cur AS (
	SELECT token, expires_at FROM ` + t + ` WHERE key = $1::text AND expires_at > now()
), old AS (
	SELECT 1 FROM cur WHERE split_part(token, ' ', 1) = $2::text
), c AS (
	SELECT (SELECT token FROM cur) AS token, (SELECT expires_at FROM cur) AS expires_at
), gone AS (
	DELETE FROM ` + t + ` WHERE key = $1::text AND NOT EXISTS (SELECT 1 FROM cur WHERE token IS NULL)
), ins AS (
	INSERT INTO ` + t + ` (key, token, expires_at)
	SELECT $1::text,
		CASE WHEN c.token IS NULL THEN ' ' || $2::text ELSE
			` + keptFences("c.token", "$2::text") + `
			|| ' ' || $2::text END,
		CASE WHEN c.token IS NOT NULL AND split_part(c.token, ' ', 1) NOT IN ('', $2::text)
			THEN c.expires_at ELSE ` + fmt.Sprintf(after, "$3") + ` END
	FROM c WHERE NOT EXISTS (SELECT 1 FROM cur WHERE token IS NULL)
)
SELECT count(*)::int FROM old`
}
