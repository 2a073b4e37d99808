package dedupe_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// heldSizes are the files BenchmarkSQLiteGrowthHeld compares, and how long
// it measures each in one round: with DEDUPE_GROWTH=1, 100k, 1M and 10M
// marks (or DEDUPE_GROWTH_SIZES) for 3 s, 7 rounds; without, so that CI's one
// pass over every benchmark stays short, 1,000 and 10,000 marks for 200 ms,
// one round.
func heldSizes() (sizes []int, round time.Duration, rounds int) {
	if os.Getenv("DEDUPE_GROWTH") != "1" {
		return []int{1000, 10_000}, 200 * time.Millisecond, 1
	}
	if os.Getenv("DEDUPE_GROWTH_SIZES") == "" {
		return []int{100_000, 1_000_000, 10_000_000}, 3 * time.Second, 7
	}
	return sqliteGrowthSizes(), 3 * time.Second, 7
}

// heldFile is one file of BenchmarkSQLiteGrowthHeld and its rounds' keys/s.
type heldFile struct {
	size              int
	claimMark, exists func(r *rand.Rand) error
	cm, ex            []float64
	cmRatio, exRatio  []float64
}

// BenchmarkSQLiteGrowthHeld is issue 38's growth check of the SQLite store
// (default settings: WAL, synchronous=FULL): does Claim+Mark keep its pace
// as the file grows? It builds one file per size, then measures them in
// turn, round after round, so that a change in the shared machine's speed
// falls on every file alike: 64 callers of Claim then Mark of new keys for
// a round's time, then 64 callers of Exists of remembered keys at random.
// It reports each file's median keys/s and the median of the rounds' ratios
// to the smallest file (cm-x, ex-x). Building the 10M file takes a minute or
// two.
//
//	DEDUPE_GROWTH=1 go test -run '^$' -bench SQLiteGrowthHeld -benchtime 1x -timeout 1h .
func BenchmarkSQLiteGrowthHeld(b *testing.B) {
	sizes, round, rounds := heldSizes()
	var files []*heldFile
	for _, size := range sizes {
		files = append(files, newHeldFile(b, size))
	}
	b.ReportAllocs()
	for b.Loop() {
		for range rounds {
			for _, f := range files {
				f.cm = append(f.cm, callersFor(b, round, f.claimMark))
				f.ex = append(f.ex, callersFor(b, round, f.exists))
				last := len(f.cm) - 1
				f.cmRatio = append(f.cmRatio, f.cm[last]/files[0].cm[last])
				f.exRatio = append(f.exRatio, f.ex[last]/files[0].ex[last])
			}
		}
	}
	for _, f := range files {
		b.ReportMetric(median(f.cm), fmt.Sprintf("cm-keys/s@%d", f.size))
		b.ReportMetric(median(f.ex), fmt.Sprintf("ex-keys/s@%d", f.size))
		if f != files[0] {
			b.ReportMetric(median(f.cmRatio), fmt.Sprintf("cm-x@%d", f.size))
			b.ReportMetric(median(f.exRatio), fmt.Sprintf("ex-x@%d", f.size))
		}
		b.Logf("keys=%d: claimmark keys/s %.0f, exists keys/s %.0f", f.size, f.cm, f.ex)
	}
}

// newHeldFile builds a file of size marks and opens the store on it.
func newHeldFile(b *testing.B, size int) *heldFile {
	path := filepath.Join(b.TempDir(), "d.db")
	_ = benchStore(b, path, dedupe.SQLiteConfig{}).Close() // the schema
	buildMarks(b, path, size, benchClock.Add(time.Hour))
	if fi, err := os.Stat(path); err == nil {
		b.Logf("keys=%d: file %d bytes", size, fi.Size())
	}
	s := benchStore(b, path, dedupe.SQLiteConfig{})
	ctx := context.Background()
	prefix := strconv.Itoa(size) + "-"
	var next atomic.Int64
	return &heldFile{
		size: size,
		claimMark: func(*rand.Rand) error {
			k := dedupe.Key{Channel: "new", MessageID: prefix + strconv.FormatInt(next.Add(1), 10)}
			if _, st, err := claimNew(ctx, s, k, time.Minute); err != nil || st != dedupe.Claimed {
				return fmt.Errorf("claim %s: %v, %v", k, st, err)
			}
			return s.Mark(ctx, k, time.Hour)
		},
		exists: func(r *rand.Rand) error {
			k := dedupe.Key{Channel: "bench", MessageID: fmt.Sprintf("%07d", r.IntN(size))}
			if ok, err := s.Exists(ctx, k); err != nil || !ok {
				return fmt.Errorf("Exists(%s) = %v, %v", k, ok, err)
			}
			return nil
		},
	}
}

// callersFor runs op from benchCallers goroutines for d and returns the calls
// per second.
func callersFor(b *testing.B, d time.Duration, op func(r *rand.Rand) error) float64 {
	var done atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for g := range benchCallers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 11))
			for !stop.Load() {
				if err := op(r); err != nil {
					b.Error(err)
					return
				}
				done.Add(1)
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
