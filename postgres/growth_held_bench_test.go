package postgres

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldSizes are the tables BenchmarkGrowthHeld compares, and round how long
// it measures each in one round: with DEDUPE_GROWTH=1, 100k, 1M and 10M
// marks (or DEDUPE_GROWTH_SIZES) for 3 s; without, so that CI's one pass
// over every benchmark stays short, 1,000 and 10,000 marks for 200 ms.
func heldSizes() (sizes []int, round time.Duration, rounds int) {
	if os.Getenv("DEDUPE_GROWTH") != "1" {
		return []int{1000, 10_000}, 200 * time.Millisecond, 1
	}
	return growthSizesFromEnv([]int{100_000, 1_000_000, 10_000_000}), 3 * time.Second, 7
}

// heldTable is one table of BenchmarkGrowthHeld and its measurements.
type heldTable struct {
	size       int
	claimMark  func(ctx context.Context, lat *[]time.Duration) error
	exists     func(ctx context.Context, lat *[]time.Duration) error
	cm, ex     []float64 // keys/s of each round
	cmRatio    []float64 // each round's claimmark keys/s over the smallest table's
	existRatio []float64
}

// BenchmarkGrowthHeld is issue 38's growth check on the plain layout: does
// Claim+Mark keep its pace as the table grows, on a server whose
// shared_buffers is what docs/sizing.md says for the largest table? It fills
// one table per size by COPY (marks expiring over the next 23 h), vacuums
// and checkpoints, then measures the tables in turn, round after round
// (so that a change in the shared machine's speed falls on every table
// alike): 64 callers of Claim then Mark of new keys for a round's time,
// then 64 callers of Exists of remembered keys at random. It reports each
// table's median keys/s and the median of the rounds' ratios to the smallest
// table (cm-x, ex-x), and logs the server's shared_buffers and the tables'
// sizes. With DEDUPE_GROWTH_PREWARM=1 it reads each table into
// shared_buffers first (pg_prewarm). Run it on a private server
// (docs/sizing.md):
//
//	DEDUPE_GROWTH=1 DEDUPE_POSTGRES_DSN=postgres://postgres@127.0.0.1:5441/test \
//	  go test -run '^$' -bench GrowthHeld -benchtime 1x -timeout 2h ./postgres
func BenchmarkGrowthHeld(b *testing.B) {
	sizes, round, rounds := heldSizes()
	pool := newPool(b, "", benchPoolSize)
	ctx := context.Background()
	var sb string
	require.NoError(b, pool.QueryRow(ctx, `SHOW shared_buffers`).Scan(&sb))
	var tables []*heldTable
	for _, size := range sizes {
		cfg := Config{Table: testTable(b)}
		s := newTestStore(b, pool, cfg)
		var now time.Time
		require.NoError(b, pool.QueryRow(ctx, `SELECT now()`).Scan(&now))
		fillMarks(b, pool, pgx.Identifier{cfg.Table}, "", size, now.Add(time.Hour), 23*time.Hour)
		if os.Getenv("DEDUPE_GROWTH_PREWARM") == "1" {
			prewarm(b, pool, cfg.Table)
		}
		b.Logf("keys=%d: %d bytes, shared_buffers %s", size, relationBytes(b, pool, cfg.Table), sb)
		w := &claimMark{pool: pool, s: s, keys: &benchKeys{prefix: randomHex(b, 4) + "-"}}
		t := &heldTable{size: size, claimMark: w.store}
		t.exists = existsOfFill(s, size)
		warmUp(b, t.claimMark)
		warmUp(b, t.exists)
		tables = append(tables, t)
	}
	b.ReportAllocs()
	for b.Loop() {
		for range rounds {
			for _, t := range tables {
				t.cm = append(t.cm, forDuration(b, round, t.claimMark))
				t.ex = append(t.ex, forDuration(b, round, t.exists))
				t.cmRatio = append(t.cmRatio, t.cm[len(t.cm)-1]/tables[0].cm[len(t.cm)-1])
				t.existRatio = append(t.existRatio, t.ex[len(t.ex)-1]/tables[0].ex[len(t.ex)-1])
			}
		}
	}
	for _, t := range tables {
		b.ReportMetric(median(t.cm), fmt.Sprintf("cm-keys/s@%d", t.size))
		b.ReportMetric(median(t.ex), fmt.Sprintf("ex-keys/s@%d", t.size))
		if t != tables[0] {
			b.ReportMetric(median(t.cmRatio), fmt.Sprintf("cm-x@%d", t.size))
			b.ReportMetric(median(t.existRatio), fmt.Sprintf("ex-x@%d", t.size))
		}
		b.Logf("keys=%d: claimmark keys/s %.0f, exists keys/s %.0f", t.size, t.cm, t.ex)
	}
}

// prewarm reads table and its indexes into shared_buffers with pg_prewarm
// (https://www.postgresql.org/docs/current/pgprewarm.html), as a server that
// has served the table for a while holds them; the extension must exist in
// the database (CREATE EXTENSION pg_prewarm).
func prewarm(b *testing.B, pool *pgxpool.Pool, table string) {
	b.Helper()
	_, err := pool.Exec(context.Background(), `SELECT pg_prewarm($1::regclass),
	(SELECT sum(pg_prewarm(indexrelid)) FROM pg_index WHERE indrelid = $1::regclass)`, table)
	require.NoError(b, err, "pg_prewarm")
}

// forDuration runs op from 64 callers for d and returns the calls per second.
func forDuration(b *testing.B, d time.Duration, op func(ctx context.Context, lat *[]time.Duration) error) float64 {
	var done atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for range 64 {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1024)
			for !stop.Load() {
				if !assert.NoError(b, op(context.Background(), &lat)) {
					return
				}
				done.Add(1)
				lat = lat[:0]
			}
		})
	}
	time.Sleep(d) // the measurement's length, not a synchronisation
	stop.Store(true)
	wg.Wait()
	return float64(done.Load()) / time.Since(start).Seconds()
}

// median returns the median of xs.
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
