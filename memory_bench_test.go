package dedupe_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	lru "github.com/hashicorp/golang-lru/v2"
)

// The baseline of these benchmarks is what a gateway would write by hand: one
// lru.Cache (a single lock) holding an expiry per key, checked with Get and
// filled with Add.

const benchSize = 10000

func newBaseline(b *testing.B) *lru.Cache[dedupe.Key, int64] {
	c, err := lru.New[dedupe.Key, int64](benchSize)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// baselineSeen is the hand-written check-then-set: Get, and Add if absent or
// expired. Unlike Claim it is not atomic.
func baselineSeen(c *lru.Cache[dedupe.Key, int64], k dedupe.Key) bool {
	now := time.Now().UnixNano()
	if exp, ok := c.Get(k); ok && now < exp {
		return true
	}
	c.Add(k, now+int64(time.Hour))
	return false
}

// baselineClaimMark does by hand what Claim then Mark do, with the same
// lru.Cache: Get, Add a claim, and after processing Add the mark. The Get and
// the first Add are not one atomic step, so two copies can both pass.
func baselineClaimMark(c *lru.Cache[dedupe.Key, int64], k dedupe.Key) {
	if exp, ok := c.Get(k); ok && time.Now().UnixNano() < exp {
		return
	}
	c.Add(k, time.Now().UnixNano()+int64(time.Minute))
	c.Add(k, time.Now().UnixNano()+int64(time.Hour))
}

func BenchmarkMemoryExists(b *testing.B) {
	ctx := context.Background()
	keys := newKeys(1000)
	b.Run("impl=dedupe", func(b *testing.B) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize})
		for _, k := range keys {
			_ = st.Mark(ctx, k, time.Hour)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if ok, _ := st.Exists(ctx, keys[i%len(keys)]); !ok {
				b.Fatal("missing")
			}
		}
	})
	b.Run("impl=lru", func(b *testing.B) {
		c := newBaseline(b)
		for _, k := range keys {
			baselineSeen(c, k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if exp, ok := c.Get(keys[i%len(keys)]); !ok || time.Now().UnixNano() >= exp {
				b.Fatal("missing")
			}
		}
	})
}

// BenchmarkMemoryClaimMark claims and marks a new key in a full store, so that
// every iteration evicts.
func BenchmarkMemoryClaimMark(b *testing.B) {
	ctx := context.Background()
	keys := newKeys(1 << 18)
	b.Run("impl=dedupe", func(b *testing.B) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize})
		fill(b, st, keys[:benchSize])
		b.ReportAllocs()
		b.ResetTimer()
		for i := benchSize; b.Loop(); i++ {
			k := keys[i%len(keys)]
			if c, _ := st.Claim(ctx, k, time.Minute); c.Status == dedupe.Claimed {
				_ = st.Mark(ctx, k, time.Hour)
			}
		}
	})
	b.Run("impl=lru", func(b *testing.B) {
		c := newBaseline(b)
		for _, k := range keys[:benchSize] {
			baselineSeen(c, k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := benchSize; b.Loop(); i++ {
			baselineSeen(c, keys[i%len(keys)])
		}
	})
	b.Run("impl=lru-claim-mark", func(b *testing.B) {
		c := newBaseline(b)
		for _, k := range keys[:benchSize] {
			baselineSeen(c, k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := benchSize; b.Loop(); i++ {
			baselineClaimMark(c, keys[i%len(keys)])
		}
	})
}

// BenchmarkMemoryParallel is BenchmarkMemoryClaimMark from every core at once
// (run it with -cpu 2 or more).
func BenchmarkMemoryParallel(b *testing.B) {
	ctx := context.Background()
	keys := newKeys(1 << 18)
	var next atomic.Int64
	stride := func() int { // each goroutine walks its own part of keys
		return int(next.Add(1)) * 7919
	}
	b.Run("impl=dedupe", func(b *testing.B) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize})
		fill(b, st, keys[:benchSize])
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := stride()
			for ; pb.Next(); i++ {
				k := keys[i%len(keys)]
				if c, _ := st.Claim(ctx, k, time.Minute); c.Status == dedupe.Claimed {
					_ = st.Mark(ctx, k, time.Hour)
				}
			}
		})
	})
	b.Run("impl=lru", func(b *testing.B) {
		c := newBaseline(b)
		for _, k := range keys[:benchSize] {
			baselineSeen(c, k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := stride()
			for ; pb.Next(); i++ {
				baselineSeen(c, keys[i%len(keys)])
			}
		})
	})
	b.Run("impl=lru-claim-mark", func(b *testing.B) {
		c := newBaseline(b)
		for _, k := range keys[:benchSize] {
			baselineSeen(c, k)
		}
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := stride()
			for ; pb.Next(); i++ {
				baselineClaimMark(c, keys[i%len(keys)])
			}
		})
	})
}

func fill(b *testing.B, st dedupe.Store, keys []dedupe.Key) {
	for _, k := range keys {
		if err := st.Mark(context.Background(), k, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}
