package postgres

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// sizeMarks is how many marks BenchmarkBytesPerMark writes: 200,000, or
// 20,000 where CI runs every benchmark once as a smoke test.
func sizeMarks() int {
	if n, err := strconv.Atoi(os.Getenv("DEDUPE_SIZE_MARKS")); err == nil && n > 0 {
		return n // DEDUPE_SIZE_MARKS, as in every module's bytes-per-mark benchmark
	}
	if os.Getenv("CI") != "" {
		return 20_000
	}
	return 200_000
}

// sizeKey is the i-th key of the size benchmarks: a Telegram message with a
// ten-digit id ("telegram:1000000000"), the key of issue 38's figures.
func sizeKey(i int) dedupe.Key {
	return dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + i)}
}

// relationBytes returns the bytes of table (every partition's, if it is
// partitioned), its indexes and TOAST included.
func relationBytes(tb testing.TB, pool *pgxpool.Pool, table string) int64 {
	tb.Helper()
	var n int64
	require.NoError(tb, pool.QueryRow(context.Background(), `SELECT coalesce(
	(SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree($1::regclass)),
	pg_total_relation_size($1::regclass))::bigint`, table).Scan(&n))
	return n
}

// indexBytes returns the bytes of table's indexes (every partition's).
func indexBytes(tb testing.TB, pool *pgxpool.Pool, table string) int64 {
	tb.Helper()
	var n int64
	require.NoError(tb, pool.QueryRow(context.Background(), `SELECT coalesce(
	(SELECT sum(pg_indexes_size(relid)) FROM pg_partition_tree($1::regclass)),
	pg_indexes_size($1::regclass))::bigint`, table).Scan(&n))
	return n
}

// BenchmarkBytesPerMark reports what a mark costs the server on disk and in
// its buffers: pg_total_relation_size (heap, indexes and TOAST of every
// partition) after sizeMarks marks of ten-digit ids ("telegram:" and 10
// digits: a 19-byte key), 24 h TTL, expiring over the next day, written by
// MarkUntil in batches of 1,000 and vacuumed, less the empty table's size.
// Beside the two layouts is the anchor, a bare table of the same keys as a
// text primary key (impl=bare-pk). index-B/mark is the indexes' part of
// B/mark, what shared_buffers must hold for lookups to stay in memory; id-B
// and key-B are the id's and the stored key's lengths.
//
//	go test -run '^$' -bench BytesPerMark -benchtime 1x -count 1 ./postgres
func BenchmarkBytesPerMark(b *testing.B) {
	pool := newPool(b, "", 4)
	n := sizeMarks()
	for _, l := range growthLayouts {
		b.Run("impl="+l.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				cfg := l.cfg
				cfg.Table = testTable(b)
				s := newTestStore(b, pool, cfg)
				before, idx := relationBytes(b, pool, cfg.Table), indexBytes(b, pool, cfg.Table)
				fillBulk(b, s, n)
				vacuum(b, pool, cfg.Table)
				reportMarkBytes(b, relationBytes(b, pool, cfg.Table)-before, n)
				b.ReportMetric(float64(indexBytes(b, pool, cfg.Table)-idx)/float64(n), "index-B/mark")
			}
		})
	}
	b.Run("impl=bare-pk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			table := testTable(b)
			ctx := context.Background()
			_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (key text PRIMARY KEY)`)
			require.NoError(b, err)
			before, idx := relationBytes(b, pool, table), indexBytes(b, pool, table)
			i := 0
			_, err = pool.CopyFrom(ctx, pgx.Identifier{table}, []string{"key"}, pgx.CopyFromFunc(func() ([]any, error) {
				if i == n {
					return nil, nil
				}
				i++
				return []any{sizeKey(i - 1).String()}, nil
			}))
			require.NoError(b, err)
			vacuum(b, pool, table)
			reportMarkBytes(b, relationBytes(b, pool, table)-before, n)
			b.ReportMetric(float64(indexBytes(b, pool, table)-idx)/float64(n), "index-B/mark")
		}
	})
}

// fillBulk marks sizeKey(0) to sizeKey(n-1) on s by MarkUntil, 1,000 at a
// time, expiring over the next 24 h.
func fillBulk(tb testing.TB, s *Store, n int) {
	tb.Helper()
	const batch = 1000
	now := time.Now()
	keys := make([]dedupe.Key, 0, batch)
	exps := make([]time.Time, 0, batch)
	for i := 0; i < n; i += batch {
		keys, exps = keys[:0], exps[:0]
		for j := i; j < min(i+batch, n); j++ {
			keys = append(keys, sizeKey(j))
			exps = append(exps, now.Add(time.Hour+23*time.Hour/time.Duration(n)*time.Duration(j))) // 23h*j overflows past j = 111,000
		}
		_, err := s.MarkUntil(context.Background(), keys, exps)
		require.NoError(tb, err, "MarkUntil")
	}
}

// vacuum vacuums and analyzes table, so that its size is the steady one of a
// table autovacuum keeps (the visibility and free-space maps included).
func vacuum(tb testing.TB, pool *pgxpool.Pool, table string) {
	tb.Helper()
	_, err := pool.Exec(context.Background(), `VACUUM (ANALYZE) `+table)
	require.NoError(tb, err)
}

// reportMarkBytes reports bytes/n as B/mark, with the ids' and keys' sizes.
func reportMarkBytes(b *testing.B, bytes int64, n int) {
	b.ReportMetric(float64(bytes)/float64(n), "B/mark")
	b.ReportMetric(float64(len(sizeKey(0).MessageID)), "id-B")
	b.ReportMetric(float64(len(sizeKey(0).String())), "key-B")
	b.Logf("%d marks: %d bytes (%s)", n, bytes, fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)))
}
