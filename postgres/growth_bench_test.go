package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// growthSizes are the numbers of remembered keys BenchmarkGrowth fills the
// table with (issue 25 item 3). CI runs every benchmark once, as a smoke
// test: there (CI set) the tables are filled with a small fraction.
var growthSizes = growthSizesFromEnv(ciScaled([]int{100_000, 1_000_000}))

// growthSizesFromEnv returns the sizes DEDUPE_GROWTH_SIZES lists, or def.
func growthSizesFromEnv(def []int) []int {
	v := os.Getenv("DEDUPE_GROWTH_SIZES")
	if v == "" {
		return def
	}
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return def
		}
		sizes = append(sizes, n)
	}
	return sizes
}

// ciScaled returns sizes, or sizes divided by 100 when the CI variable is
// set. DEDUPE_GROWTH_SIZES (comma-separated key counts, such as
// "100000,10000000") replaces BenchmarkGrowth's sizes.
func ciScaled(sizes []int) []int {
	if os.Getenv("CI") == "" {
		return sizes
	}
	small := make([]int, len(sizes))
	for i, n := range sizes {
		small[i] = max(n/100, 1)
	}
	return small
}

// growthLayouts are the layouts the growth benchmarks compare: the plain
// table and daily partitions.
var growthLayouts = []struct {
	name string
	cfg  Config
}{
	{"plain", Config{}},
	{"partitioned", Config{Partitioned: true}},
}

// fillMarks copies n marks of keys "fill:<prefix><i>" into table ident by
// COPY, expiring at from + i/n of spread (distinct expiries over the range),
// vacuums and analyzes the table, and checkpoints.
func fillMarks(b testing.TB, pool *pgxpool.Pool, ident pgx.Identifier, prefix string, n int, from time.Time, spread time.Duration) {
	b.Helper()
	ctx := context.Background()
	i := 0
	_, err := pool.CopyFrom(ctx, ident, []string{"key", "token", "expires_at"}, pgx.CopyFromFunc(func() ([]any, error) {
		if i == n {
			return nil, nil
		}
		row := []any{"fill:" + prefix + strconv.Itoa(i), nil, from.Add(time.Duration(int64(spread) / int64(n) * int64(i)))}
		i++
		return row, nil
	}))
	require.NoError(b, err, "COPY %d rows", n)
	// A table that grew over days has been vacuumed (its rows' hint bits set,
	// its pages all visible) and checkpointed. Without this the first reads
	// of the rows COPY wrote dirty their pages, and the checkpoint COPY's
	// gigabyte of WAL set off runs while the store is measured.
	_, err = pool.Exec(ctx, `VACUUM (ANALYZE) `+ident.Sanitize())
	require.NoError(b, err)
	if _, err := pool.Exec(ctx, `CHECKPOINT`); err != nil {
		b.Logf("CHECKPOINT (needs pg_checkpoint or a superuser): %v", err)
	}
}

// expiredDay fills table (s's, in c's schema) with n marks expiring over one
// day, in one daily partition on the partitioned layout, moves c two days on,
// so that they have all expired, creates the partitions ahead of the new now,
// and returns the table's identifier.
func expiredDay(tb testing.TB, c *serverClock, pool *pgxpool.Pool, s *Store, table string, n int) pgx.Identifier {
	tb.Helper()
	ident := pgx.Identifier{c.schema, table[len(c.schema)+1:]}
	fillMarks(tb, pool, ident, "old", n, c.now(tb).Truncate(24*time.Hour).Add(time.Minute), 23*time.Hour)
	c.advance(tb, 2*24*time.Hour)
	if s.part != nil {
		require.NoError(tb, s.part.add(context.Background(), pool, s.part.ahead))
	}
	return ident
}

// BenchmarkGrowth measures the store on a table already remembering 100k and
// 1M keys, plain and partitioned by day (24 h TTL: the marks expire over
// the next day, in 2 partitions, of 3 created ahead), filled by COPY: Claim
// then Mark of new keys by 64 callers (keys/s, and claim-p99-µs the p99 of
// the Claim), and Exists of remembered keys by 64 callers (claim-p99-µs is
// then the p99 of the Exists).
func BenchmarkGrowth(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	for _, size := range growthSizes {
		for _, l := range growthLayouts {
			cfg := l.cfg
			cfg.Table = testTable(b)
			s := newTestStore(b, pool, cfg)
			var now time.Time
			require.NoError(b, pool.QueryRow(context.Background(), `SELECT now()`).Scan(&now))
			fillMarks(b, pool, pgx.Identifier{cfg.Table}, "", size, now.Add(time.Minute), 23*time.Hour)
			w := &claimMark{pool: pool, s: s, keys: &benchKeys{prefix: randomHex(b, 4) + "-"}}
			exists := existsOfFill(s, size)
			warmUp(b, w.store)
			warmUp(b, exists)
			name := fmt.Sprintf("keys=%d/layout=%s", size, l.name)
			b.Run(name+"/op=claimmark", func(b *testing.B) { callers(b, 64, w.store) })
			b.Run(name+"/op=exists", func(b *testing.B) { callers(b, 64, exists) })
		}
	}
}

// BenchmarkCleanupUnderLoad measures what the expiry of one day's marks
// costs the writers: a table of 500k marks expired a day ago (in one daily
// partition, on the partitioned layout) and 100k live ones, and 64 callers
// claiming and marking new keys; CleanupExpired then removes the expired day,
// by DETACH … CONCURRENTLY and DROP of its partition, or on the plain table
// by DELETEs of 1,000 rows. It reports the writers' keys/s and Claim p99
// from the cleanup's start to its end, or for a second if it ends sooner
// (during-keys/s, during-p99-µs), and over the 3 s before it (before-keys/s,
// before-p99-µs), and the cleanup's duration. Run it with -benchtime 1x.
func BenchmarkCleanupUnderLoad(b *testing.B) {
	sizes := ciScaled([]int{500_000, 100_000})
	expired, live := sizes[0], sizes[1]
	for _, l := range growthLayouts {
		b.Run("layout="+l.name, func(b *testing.B) {
			for range b.N {
				cleanupUnderLoad(b, l.cfg, expired, live)
			}
		})
	}
}

// beforeWindow is how long BenchmarkCleanupUnderLoad measures the writers
// before the cleanup, and minDuringWindow the least it measures them from the
// cleanup's start: a cleanup shorter than that is charged with what follows
// it too (the writers replan their statements after a detach).
const (
	beforeWindow    = 3 * time.Second
	minDuringWindow = time.Second
)

func cleanupUnderLoad(b *testing.B, cfg Config, expired, live int) {
	b.StopTimer()
	c := newServerClock(b)
	pool := c.pool(b, benchPoolSize)
	cfg.Table = c.table(b)
	s := newTestStore(b, pool, cfg)
	ident := expiredDay(b, c, pool, s, cfg.Table, expired)
	fillMarks(b, pool, ident, "live", live, c.now(b).Add(time.Hour), 20*time.Hour)

	w := &claimMark{pool: pool, s: s, keys: &benchKeys{prefix: randomHex(b, 4) + "-"}}
	warmUp(b, w.store)
	var window loadWindow
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() { window.write(b, w) })
	}
	time.Sleep(beforeWindow) // the writers' pace before the cleanup
	window.next()
	b.StartTimer()
	start := time.Now()
	n, err := s.CleanupExpired(context.Background())
	took := time.Since(start)
	b.StopTimer()
	during := max(took, minDuringWindow)
	time.Sleep(during - took)
	window.next()
	wg.Wait()
	// A large partition's rows are the statistics' estimate (exact after the
	// VACUUM of fillMarks, within a few rows of it).
	require.NoError(b, err, "CleanupExpired")
	require.GreaterOrEqual(b, n, int64(expired)*99/100, "CleanupExpired: want the %d expired rows", expired)
	require.LessOrEqual(b, n, int64(expired)*101/100, "CleanupExpired: want the %d expired rows", expired)
	b.ReportMetric(float64(window.done[0].Load())/beforeWindow.Seconds(), "before-keys/s")
	b.ReportMetric(float64(window.done[1].Load())/during.Seconds(), "during-keys/s")
	b.ReportMetric(float64(window.lat[0].p99().Microseconds()), "before-p99-µs")
	b.ReportMetric(float64(window.lat[1].p99().Microseconds()), "during-p99-µs")
	b.ReportMetric(took.Seconds()*1000, "cleanup-ms")
}

// loadWindow counts the Claim+Mark calls of writers, and their Claims'
// durations, in two phases: before the cleanup and during it. A call is
// counted in the phase it ended in, so that each phase counts the calls
// completed in it (counting only the calls that began and ended in a phase
// would leave out the 64 that straddle each of its edges: a tenth of a
// phase under a second long).
type loadWindow struct {
	phase atomic.Int32 // 0 before, 1 during, 2 stop
	done  [2]atomic.Int64
	lat   [2]latencies
}

func (l *loadWindow) next() { l.phase.Add(1) }

// write claims and marks new keys until the last phase.
func (l *loadWindow) write(b *testing.B, w *claimMark) {
	for l.phase.Load() < 2 {
		var d []time.Duration
		if !assert.NoError(b, w.store(context.Background(), &d)) {
			return
		}
		if p := l.phase.Load(); p < 2 {
			l.done[p].Add(1)
			l.lat[p].add(d)
		}
	}
}

// existsOfFill returns a caller that asks s whether a random one of the
// size marks fillMarks wrote exists, and fails if it does not.
func existsOfFill(s *Store, size int) func(ctx context.Context, lat *[]time.Duration) error {
	return func(ctx context.Context, lat *[]time.Duration) error {
		k := dedupe.Key{Channel: "fill", MessageID: strconv.Itoa(rand.IntN(size))}
		var ok bool
		err := timed(lat, func() (err error) {
			ok, err = s.Exists(ctx, k)
			return err
		})
		if err != nil || !ok {
			return fmt.Errorf("Exists(%s) = %v, %v", k, ok, err)
		}
		return nil
	}
}
