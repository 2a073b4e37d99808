package dedupe_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The BatchStore benchmarks: one op is 64 new keys claimed and marked (the
// Deduper's path for a batch processed once). The baseline, impl=calls, is
// what a caller without a batch API does: 64 goroutines, each Claim then Mark
// of its key; impl=each is ClaimEach then MarkEach of the 64. Compare them:
//
//	for i in $(seq 8); do go test -run '^$' -bench 'Each$' -count 1 . >> each.txt; done
//	benchstat -col /impl each.txt

const benchBatch = 64

// benchEach runs the two ways of claiming and marking benchBatch new keys
// per op on stores that newStore opens.
func benchEach(b *testing.B, newStore func(b *testing.B) dedupe.Store) {
	b.Run("impl=calls", func(b *testing.B) {
		st := newStore(b)
		runBatches(b, func(keys []dedupe.Key) error {
			var wg sync.WaitGroup
			errs := make(chan error, len(keys))
			for _, k := range keys {
				wg.Go(func() { errs <- claimMark(st, k) })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
	b.Run("impl=each", func(b *testing.B) {
		st := newStore(b)
		bs := st.(dedupe.BatchStore)
		ctx := context.Background()
		claims := make([]dedupe.Claim, benchBatch)
		runBatches(b, func(keys []dedupe.Key) error {
			for i, k := range keys {
				claims[i] = dedupe.NewClaim(k)
			}
			statuses, errs := bs.ClaimEach(ctx, claims, time.Minute)
			for i, err := range errs {
				if err != nil || statuses[i] != dedupe.Claimed {
					return fmt.Errorf("ClaimEach: item %d: %v, %v", i, statuses[i], err)
				}
			}
			for i, err := range bs.MarkEach(ctx, keys, nil, time.Hour) {
				if err != nil {
					return fmt.Errorf("MarkEach: item %d: %w", i, err)
				}
			}
			return nil
		})
	})
}

// claimMark claims k and marks it, as Deduper.Do does for a new key.
func claimMark(st dedupe.Store, k dedupe.Key) error {
	ctx := context.Background()
	status, err := st.Claim(ctx, dedupe.NewClaim(k), time.Minute)
	if err != nil || status != dedupe.Claimed {
		return fmt.Errorf("Claim(%s): %v, %v", k, status, err)
	}
	return st.Mark(ctx, k, time.Hour)
}

// runBatches calls f b.N times, each with benchBatch new keys.
func runBatches(b *testing.B, f func(keys []dedupe.Key) error) {
	b.Helper()
	keys := make([]dedupe.Key, benchBatch)
	n := 0
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		for i := range keys {
			n++
			keys[i] = dedupe.Key{Channel: "bench", MessageID: strconv.Itoa(n)}
		}
		if err := f(keys); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSQLiteEach is 64 new keys claimed and marked per op, in a store
// with synchronous=FULL.
func BenchmarkSQLiteEach(b *testing.B) {
	benchEach(b, func(b *testing.B) dedupe.Store {
		return benchStore(b, filepath.Join(b.TempDir(), "d.db"), dedupe.SQLiteConfig{})
	})
}

// BenchmarkMemoryEach is 64 new keys claimed and marked per op, in a full
// memory store (each new mark evicts the oldest of its shard), so that both
// ways run in the same steady state however many ops they reach.
func BenchmarkMemoryEach(b *testing.B) {
	benchEach(b, func(b *testing.B) dedupe.Store {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1 << 14, Logger: slog.New(slog.DiscardHandler)})
		b.Cleanup(func() { _ = st.Close() })
		return st
	})
}
