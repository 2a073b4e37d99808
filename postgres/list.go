package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatewaykit/dedupe"
)

// The optional interfaces of package migrate. Marks are walked in key order
// (the primary key, collation "C": byte order) by keyset pagination, the
// cursor being the last key yielded. Expiries cross as the remaining time on
// the server's clock, added to or taken from the local clock, so that a mark
// keeps its remaining TTL whatever the clocks say. Every statement names its
// columns, so a table with more columns than the store's three serves too.

// remainingUs is the SQL of the microseconds from the server's now to a
// timestamptz expression.
func remainingUs(expr string) string {
	return `(extract(epoch FROM ` + expr + ` - now()) * 1000000)::bigint`
}

// ListMarks calls yield with up to limit marks whose key follows cursor, in
// key order, each with its expiry on the local clock, and returns the cursor
// of the next page ("" after the last). Expired rows not yet deleted are
// included; claims and released keys never are. It is one indexed SELECT. It
// implements [dedupe.Lister].
func (s *Store) ListMarks(ctx context.Context, cursor string, limit int, yield func(key dedupe.Key, expires time.Time)) (string, error) {
	if s.closed.Load() {
		return "", dedupe.ErrClosed
	}
	limit = max(limit, 1)
	local := time.Now()
	rows, err := s.pool.Query(ctx, `SELECT key, `+remainingUs("expires_at")+` FROM `+s.table+`
WHERE key > $1 AND token IS NULL ORDER BY key LIMIT $2`, cursor, limit)
	if err != nil {
		return "", fmt.Errorf("dedupe: postgres: list marks: %w", err)
	}
	var last string
	n := 0
	var us int64
	_, err = pgx.ForEachRow(rows, []any{&last, &us}, func() error {
		n++
		ch, id, _ := strings.Cut(last, ":")
		yield(dedupe.Key{Channel: ch, MessageID: id}, local.Add(time.Duration(us)*time.Microsecond))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("dedupe: postgres: list marks: %w", err)
	}
	if n < limit {
		return "", nil
	}
	return last, nil
}

// migrateTemp is the temporary table MarkUntil copies a batch into, one per
// connection, emptied at each commit.
const migrateTemp = `dedupe_migrate_in`

// MarkUntil marks each keys[i] until expires[i] (local clock), in one
// transaction, and returns how many keys had a live mark. A live mark keeps
// the later expiry and its result; any other row of a key (a claim, a
// released key's fences, an expired mark and its result) gives way to the
// mark. On the plain table the batch goes into a temporary table by COPY,
// then into the store's table by one INSERT … ON CONFLICT. On the
// partitioned layout, whose table has no unique key, each key is written
// after its lock, as Mark writes it, all in one round trip. It implements
// [dedupe.BulkMarker].
func (s *Store) MarkUntil(ctx context.Context, keys []dedupe.Key, expires []time.Time) (int, error) {
	if len(keys) != len(expires) {
		return 0, fmt.Errorf("dedupe: postgres: mark until: %d keys, %d expiries", len(keys), len(expires))
	}
	for _, k := range keys {
		if err := s.check(ctx, "mark until", k); err != nil {
			return 0, err
		}
	}
	var present int
	var err error
	if s.part != nil {
		present, err = s.markUntilLocked(ctx, keys, expires)
	} else {
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS `+migrateTemp+
				` (key text COLLATE "C" NOT NULL, us bigint NOT NULL) ON COMMIT DELETE ROWS`); err != nil {
				return err
			}
			local := time.Now()
			_, err := tx.CopyFrom(ctx, pgx.Identifier{migrateTemp}, []string{"key", "us"},
				pgx.CopyFromSlice(len(keys), func(i int) ([]any, error) {
					return []any{keys[i].String(), expires[i].Sub(local).Microseconds()}, nil
				}))
			if err != nil {
				return err
			}
			return tx.QueryRow(ctx, s.markUntilSQL()).Scan(&present)
		})
	}
	if err != nil {
		return 0, fmt.Errorf("dedupe: postgres: mark until (%d keys): %w", len(keys), err)
	}
	return present, nil
}

// markUntilLocked is MarkUntil on the partitioned layout: it creates the
// partitions the latest expiry needs, then in one transaction and one round
// trip takes each key's lock, in key order (so that two copies never wait
// for each other in a cycle), and writes it with markUntilPartSQL.
func (s *Store) markUntilLocked(ctx context.Context, keys []dedupe.Key, expires []time.Time) (int, error) {
	order := make([]int, len(keys))
	texts := make([]string, len(keys))
	local := time.Now()
	var longest time.Duration
	for i, k := range keys {
		order[i], texts[i] = i, k.String()
		longest = max(longest, expires[i].Sub(local))
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(texts[a], texts[b]) })
	if err := s.part.add(ctx, s.pool, longest+time.Minute); err != nil {
		return 0, err
	}
	write := s.markUntilPartSQL()
	present := 0
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, i := range order {
			b.Queue(s.sql.lock, texts[i])
			b.Queue(write, texts[i], expires[i].Sub(local).Microseconds())
		}
		br := tx.SendBatch(ctx, b)
		for range order {
			if _, err := br.Exec(); err != nil {
				_ = br.Close()
				return err
			}
			var live bool
			if err := br.QueryRow().Scan(&live); err != nil {
				_ = br.Close()
				return err
			}
			if live {
				present++
			}
		}
		return br.Close()
	})
	return present, err
}

// markUntilPartSQL writes one key of MarkUntil on the partitioned layout,
// under its lock: a live mark is lengthened if it expires sooner (an UPDATE,
// which moves it to its new partition), and otherwise every row of the key
// is replaced by the mark, as Mark does. It returns whether the key had a
// live mark.
func (s *Store) markUntilPartSQL() string {
	t, exp := s.table, fmt.Sprintf(after, "$2")
	return `WITH cur AS (
	SELECT 1 FROM ` + t + ` WHERE key = $1::text AND token IS NULL AND expires_at > now()
), up AS (
	UPDATE ` + t + ` SET expires_at = ` + exp + `
	WHERE key = $1::text AND token IS NULL AND expires_at > now() AND expires_at < ` + exp + `
), gone AS (
	DELETE FROM ` + t + ` WHERE key = $1::text AND NOT EXISTS (SELECT 1 FROM cur)
), ins AS (
	INSERT INTO ` + t + ` (key, token, expires_at) SELECT $1::text, NULL, ` + exp + `
	WHERE NOT EXISTS (SELECT 1 FROM cur)
)
SELECT EXISTS (SELECT 1 FROM cur)`
}

// markUntilSQL moves the temporary table's batch into the store's table and
// returns how many of its keys had a live mark there. Rows go in key order,
// so that two copies into one table lock rows in the same order. The count
// looks each key up by the primary key (EXISTS in the select list, a
// subplan per row): as a join, the planner, which knows nothing of the
// temporary table, may hash the whole table for each batch.
func (s *Store) markUntilSQL() string {
	t := s.table
	return `WITH src AS (
	SELECT key, now() + us * interval '1 microsecond' AS exp FROM ` + migrateTemp + `
), up AS (
	INSERT INTO ` + t + ` AS d (key, token, expires_at)
	SELECT key, NULL, exp FROM src ORDER BY key
	ON CONFLICT (key) DO UPDATE SET token = NULL,
		expires_at = CASE WHEN d.token IS NULL AND d.expires_at > now()
			THEN greatest(d.expires_at, excluded.expires_at) ELSE excluded.expires_at END,
		result = CASE WHEN d.token IS NULL AND d.expires_at > now() THEN d.result END
)
SELECT coalesce(sum(CASE WHEN EXISTS (
	SELECT 1 FROM ` + t + ` d WHERE d.key = src.key AND d.token IS NULL AND d.expires_at > now()
) THEN 1 ELSE 0 END), 0)::int FROM src`
}

// CountLive returns the numbers of live marks and claims and the earliest
// and latest expiry of the live marks, on the local clock, in one aggregate
// over the table. It implements [dedupe.Counter].
func (s *Store) CountLive(ctx context.Context) (marks, claims int64, oldest, newest time.Time, err error) {
	if s.closed.Load() {
		return 0, 0, oldest, newest, dedupe.ErrClosed
	}
	local := time.Now()
	var lo, hi *int64
	err = s.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE token IS NULL),
	count(*) FILTER (WHERE token IS NOT NULL AND split_part(token, ' ', 1) <> ''),
	`+remainingUs("min(expires_at) FILTER (WHERE token IS NULL)")+`,
	`+remainingUs("max(expires_at) FILTER (WHERE token IS NULL)")+`
FROM `+s.table+` WHERE expires_at > now()`).Scan(&marks, &claims, &lo, &hi)
	if err != nil {
		return 0, 0, oldest, newest, fmt.Errorf("dedupe: postgres: count: %w", err)
	}
	if lo != nil && hi != nil {
		oldest = local.Add(time.Duration(*lo) * time.Microsecond)
		newest = local.Add(time.Duration(*hi) * time.Microsecond)
	}
	return marks, claims, oldest, newest, nil
}

// Sizes returns the bytes of the table with its indexes and TOAST (for a
// partitioned table, the sum of its partitions), and of each partition, by
// name. It implements [dedupe.Sizer].
func (s *Store) Sizes(ctx context.Context) (map[string]int64, error) {
	if s.closed.Load() {
		return nil, dedupe.ErrClosed
	}
	rows, err := s.pool.Query(ctx, `SELECT $1::regclass::text, coalesce(
	(SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1::regclass)),
	pg_total_relation_size($1::regclass))::bigint
UNION ALL
SELECT relid::text, pg_total_relation_size(relid) FROM pg_partition_tree($1::regclass)
WHERE isleaf AND relid <> $1::regclass`, s.table)
	if err != nil {
		return nil, fmt.Errorf("dedupe: postgres: sizes: %w", err)
	}
	sizes := map[string]int64{}
	var name string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&name, &n}, func() error {
		sizes[name] = n
		return nil
	}); err != nil {
		return nil, fmt.Errorf("dedupe: postgres: sizes: %w", err)
	}
	return sizes, nil
}

// SharedBuffers returns the bytes of the server's shared_buffers
// (https://www.postgresql.org/docs/current/runtime-config-resource.html):
// the page cache that keeps the table's indexes in memory.
// docs/sizing.md says how large it should be for a window of marks.
func (s *Store) SharedBuffers(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, dedupe.ErrClosed
	}
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT setting::bigint * current_setting('block_size')::bigint
FROM pg_settings WHERE name = 'shared_buffers'`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("dedupe: postgres: shared_buffers: %w", err)
	}
	return n, nil
}
