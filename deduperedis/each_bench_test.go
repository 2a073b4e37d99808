package deduperedis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// BenchmarkDoEach measures new keys taken through Deduper.DoEach with a
// no-op handler by callers handing 64 keys per batch (impl=doeach-1x64: one
// caller, impl=doeach-2x64: two), beside, in the same run, the hand-gathered
// ceiling of BenchmarkClaimMark (impl=ceiling: 2 goroutines pipelining 32
// keys per round trip, the store's claim script then SET PX), the store's
// ClaimEach then MarkEach in the ceiling's shape (impl=each-2x32), and 64
// callers of Deduper.Do (impl=do-64), each in keys/s.
func BenchmarkDoEach(b *testing.B) {
	client := benchClient(b)
	w := &claimMark{client: client, prefix: "dedupe-bench:" + randomID(b) + ":"}
	w.st = newStore(b, client, deduperedis.Config{Prefix: w.prefix, TTL: benchTTL, Lease: benchTTL})
	if err := rawClaim.Load(context.Background(), client).Err(); err != nil { // for the ceiling's EVALSHAs
		b.Fatal(err)
	}
	d := dedupe.New(w.st, dedupe.WithTTL(benchTTL), dedupe.WithLease(benchTTL))
	b.Cleanup(func() { _ = d.Close() })
	noop := func(context.Context) error { return nil }
	do := func(ctx context.Context, _ uint64) error { return d.Do(ctx, w.key(), noop) }
	warmUp(b, do)
	warmUp(b, func(ctx context.Context, _ uint64) error { return w.each(ctx, 8) })

	b.Run("impl=ceiling", func(b *testing.B) { gathered(b, w.ceiling) })
	b.Run("impl=each-2x32", func(b *testing.B) { gathered(b, w.each) })
	for _, callers := range []int{1, 2} {
		b.Run(fmt.Sprintf("impl=doeach-%dx64", callers), func(b *testing.B) { w.doEach(b, d, callers, 64) })
	}
	b.Run("impl=do-64", func(b *testing.B) { callers(b, 64, do) })
}

// each claims and marks n new keys with the store's ClaimEach and MarkEach.
func (w *claimMark) each(ctx context.Context, n int) error {
	claims := make([]dedupe.Claim, n)
	keys := make([]dedupe.Key, n)
	for i := range claims {
		keys[i] = w.key()
		claims[i] = dedupe.NewClaim(keys[i])
	}
	statuses, errs := w.st.ClaimEach(ctx, claims, 0)
	for i, err := range errs {
		if err != nil || statuses[i] != dedupe.Claimed {
			return fmt.Errorf("ClaimEach: %s: %v, %v", keys[i], statuses[i], err)
		}
	}
	for i, err := range w.st.MarkEach(ctx, keys, nil, 0) {
		if err != nil {
			return fmt.Errorf("MarkEach: %s: %w", keys[i], err)
		}
	}
	return nil
}

// doEach runs b.N new keys through d.DoEach with a no-op handler, callers
// goroutines at a time, each handing size keys per batch, and reports the
// throughput in keys/s.
func (w *claimMark) doEach(b *testing.B, d *dedupe.Deduper, callers, size int) {
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
					keys[i] = w.key()
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
