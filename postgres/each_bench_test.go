package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gatewaykit/dedupe"
)

// eachBatch is the number of keys a caller of BenchmarkEach hands over at
// once: the 64 keys in flight of the ceiling.
const eachBatch = 64

// BenchmarkEach measures new keys claimed and marked in batches of 64 by
// Deduper.DoEach with a no-op fn (impl=doeach, by 1 or 2 callers each
// with a batch in flight), beside, in the same run and on the same pool,
// the store's statements gathered by hand (impl=ceiling, as in
// BenchmarkClaimMark), Deduper.Do of one key with a no-op fn by 64 callers
// (impl=do, the per-call path) and the batch calls that DoEach makes,
// ClaimEach then MarkEach, by 1 caller (impl=each: DoEach's own cost is
// the difference).
func BenchmarkEach(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	s := newTestStore(b, pool, Config{})
	w := &claimMark{pool: pool, s: s, keys: &benchKeys{prefix: randomHex(b, 4) + "-"}}
	d := dedupe.New(s, dedupe.WithLease(time.Minute), dedupe.WithTTL(time.Hour))
	b.Cleanup(func() { _ = d.Close() })
	nop := func(context.Context) error { return nil }
	do := func(ctx context.Context, lat *[]time.Duration) error {
		return timed(lat, func() error { return d.Do(ctx, w.keys.next(), nop) })
	}
	doEach := func(ctx context.Context, keys []dedupe.Key) error {
		for i, err := range d.DoEach(ctx, keys, func(context.Context, int) error { return nil }) {
			if err != nil {
				return fmt.Errorf("DoEach: %s: %w", keys[i], err)
			}
		}
		return nil
	}
	each := func(ctx context.Context, keys []dedupe.Key) error {
		sts, errs := s.ClaimEach(ctx, newClaims(keys), time.Minute)
		for i, err := range errs {
			if err != nil || sts[i] != dedupe.Claimed {
				return fmt.Errorf("ClaimEach: %s: %v, %v", keys[i], sts[i], err)
			}
		}
		for _, err := range s.MarkEach(ctx, keys, nil, time.Hour) {
			if err != nil {
				return err
			}
		}
		return nil
	}
	warmUp(b, do)
	warmUp(b, w.store)
	for range 8 {
		assert.NoError(b, doEach(context.Background(), batchOf(w.keys, eachBatch)))
		assert.NoError(b, each(context.Background(), batchOf(w.keys, eachBatch)))
	}
	b.Run("impl=ceiling", w.ceiling)
	b.Run("impl=do", func(b *testing.B) { callers(b, 64, do) })
	b.Run("impl=each", func(b *testing.B) { batchCallers(b, 1, w.keys, each) })
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("impl=doeach/callers=%d", n), func(b *testing.B) { batchCallers(b, n, w.keys, doEach) })
	}
}

// batchOf returns n new keys.
func batchOf(keys *benchKeys, n int) []dedupe.Key {
	ks := make([]dedupe.Key, n)
	for i := range ks {
		ks[i] = keys.next()
	}
	return ks
}

// batchCallers runs op on b.N new keys, handed over eachBatch at a time by
// n goroutines, and reports the throughput in keys/s.
func batchCallers(b *testing.B, n int, keys *benchKeys, op func(ctx context.Context, keys []dedupe.Key) error) {
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	start := time.Now()
	for range n {
		wg.Go(func() {
			for {
				end := next.Add(eachBatch)
				size := min(eachBatch, int64(b.N)-(end-eachBatch))
				if size <= 0 || !assert.NoError(b, op(ctx, batchOf(keys, int(size)))) {
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "keys/s")
}
