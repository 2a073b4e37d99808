package dedupe_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// BenchmarkDoEach measures new messages through Deduper.DoEach, handed over
// 64 keys per batch, beside the per-call path it replaces: Deduper.Do from
// 64 concurrent callers (impl=do), on the memory store and a SQLite file.
// The function does nothing: what is measured is the Deduper and the store.
// Throughput is in keys/s (ns/op is per key):
//
//	for i in $(seq 8); do go test -run '^$' -bench DoEach -count 1 . >> each.txt; done
//	benchstat -col /impl each.txt
func BenchmarkDoEach(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) dedupe.Store
	}{
		{"memory", func(*testing.B) dedupe.Store { return dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1 << 24}) }},
		{"sqlite", func(b *testing.B) dedupe.Store {
			return benchStore(b, filepath.Join(b.TempDir(), "each.db"), dedupe.SQLiteConfig{Now: time.Now})
		}},
	}
	for _, s := range stores {
		b.Run("store="+s.name+"/impl=do", func(b *testing.B) {
			d := dedupe.New(s.open(b))
			var n atomic.Int64
			runCallers(b, func(int64) error {
				k := dedupe.Key{Channel: "bench", MessageID: strconv.FormatInt(n.Add(1), 10)}
				return d.Do(context.Background(), k, func(context.Context) error { return nil })
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "keys/s")
		})
		for _, callers := range []int{1, 2} {
			b.Run(fmt.Sprintf("store=%s/impl=doeach-%dx64", s.name, callers), func(b *testing.B) {
				eachBatches(b, dedupe.New(s.open(b)), callers, 64)
			})
		}
	}
}

// eachBatches runs b.N new keys through d.DoEach, callers goroutines at a
// time, each handing size keys per batch, and reports keys/s.
func eachBatches(b *testing.B, d *dedupe.Deduper, callers, size int) {
	b.Helper()
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	noop := func(context.Context, int) error { return nil }
	b.ResetTimer()
	start := time.Now()
	for range callers {
		wg.Go(func() {
			keys := make([]dedupe.Key, size)
			for {
				end := next.Add(int64(size))
				n := min(int64(size), int64(b.N)-(end-int64(size)))
				if n <= 0 {
					return
				}
				for i := range n {
					keys[i] = dedupe.Key{Channel: "bench", MessageID: strconv.FormatInt(end-int64(size)+i, 10)}
				}
				for i, err := range d.DoEach(context.Background(), keys[:n], noop) {
					if err != nil {
						b.Errorf("DoEach %s: %v", keys[i], err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "keys/s")
}
