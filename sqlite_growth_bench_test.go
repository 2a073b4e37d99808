package dedupe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// sqliteGrowthSizes are the numbers of remembered keys BenchmarkSQLiteGrowth
// fills the file with (issue 25 item 3): 100k, 1M and 10M, or the
// comma-separated counts of DEDUPE_GROWTH_SIZES. CI runs every benchmark
// once, as a smoke test: there (CI set) the sizes are divided by 100.
func sqliteGrowthSizes() []int {
	sizes := []int{100_000, 1_000_000, 10_000_000}
	if v := os.Getenv("DEDUPE_GROWTH_SIZES"); v != "" {
		sizes = sizes[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 || n > 10_000_000 {
				return []int{100_000, 1_000_000, 10_000_000}
			}
			sizes = append(sizes, n)
		}
	}
	if os.Getenv("CI") != "" {
		for i := range sizes {
			sizes[i] = max(sizes[i]/100, 1)
		}
	}
	return sizes
}

// BenchmarkSQLiteGrowth measures the SQLite store (synchronous=FULL) on a
// file already remembering 100k, 1M and 10M marks: Claim then Mark of new
// keys by 64 callers (keys/s, and p99-µs of the Claim), and Exists of
// remembered keys chosen at random by 64 callers (keys/s and p99-µs of the
// Exists). Building the 10M file takes about a minute.
//
//	go test -run '^$' -bench SQLiteGrowth -benchtime 20000x -count 1 .
func BenchmarkSQLiteGrowth(b *testing.B) {
	for _, size := range sqliteGrowthSizes() {
		path := filepath.Join(b.TempDir(), "d.db")
		_ = benchStore(b, path, dedupe.SQLiteConfig{}).Close() // the schema
		buildMarks(b, path, size, benchClock.Add(time.Hour))
		s := benchStore(b, path, dedupe.SQLiteConfig{})
		ctx := context.Background()
		var next atomic.Int64
		claimMark := func(r *rand.Rand) (time.Duration, error) {
			k := dedupe.Key{Channel: "new", MessageID: strconv.FormatInt(next.Add(1), 10)}
			start := time.Now()
			_, st, err := claimNew(ctx, s, k, time.Minute)
			took := time.Since(start)
			if err != nil || st != dedupe.Claimed {
				return 0, fmt.Errorf("claim %s: %v, %v", k, st, err)
			}
			return took, s.Mark(ctx, k, time.Hour)
		}
		exists := func(r *rand.Rand) (time.Duration, error) {
			k := dedupe.Key{Channel: "bench", MessageID: fmt.Sprintf("%07d", r.IntN(size))}
			start := time.Now()
			ok, err := s.Exists(ctx, k)
			took := time.Since(start)
			if err != nil || !ok {
				return 0, fmt.Errorf("Exists(%s) = %v, %v", k, ok, err)
			}
			return took, nil
		}
		name := fmt.Sprintf("keys=%d", size)
		b.Run(name+"/op=claimmark", func(b *testing.B) { growthCallers(b, claimMark) })
		b.Run(name+"/op=exists", func(b *testing.B) { growthCallers(b, exists) })
		_ = s.Close()
	}
}

// growthCallers runs b.N calls of op from benchCallers goroutines and reports
// keys/s and the p99 of the latencies op returns.
func growthCallers(b *testing.B, op func(r *rand.Rand) (time.Duration, error)) {
	b.ReportAllocs()
	var (
		mu   sync.Mutex // guards all
		all  []time.Duration
		left atomic.Int64
		wg   sync.WaitGroup
	)
	left.Store(int64(b.N))
	start := time.Now()
	for g := range benchCallers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 7))
			var lat []time.Duration
			for left.Add(-1) >= 0 {
				d, err := op(r)
				if err != nil {
					b.Error(err)
					return
				}
				lat = append(lat, d)
			}
			mu.Lock()
			all = append(all, lat...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "keys/s")
	if len(all) > 0 {
		slices.Sort(all)
		b.ReportMetric(float64(all[len(all)*99/100].Microseconds()), "p99-µs")
	}
}
