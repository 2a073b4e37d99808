package dedupe_test

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/hashicorp/golang-lru/v2/simplelru"
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
		c := filledBaseline(b, keys)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; b.Loop(); i++ {
			if exp, ok := c.Get(keys[i%len(keys)]); !ok || time.Now().UnixNano() >= exp {
				b.Fatal("missing")
			}
		}
	})
}

// claimMarkImpls are the contenders of BenchmarkMemoryClaimMark and
// BenchmarkMemoryParallel. Each set-up fills a store with the first benchSize
// keys and returns a function that each benchmark goroutine calls once to get
// the operation it runs on new keys.
var claimMarkImpls = []struct {
	name  string
	setup func(*testing.B, []dedupe.Key) func() func(dedupe.Key)
}{
	{"dedupe", func(b *testing.B, keys []dedupe.Key) func() func(dedupe.Key) {
		ctx := context.Background()
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize})
		fill(b, st, keys[:benchSize])
		return shared(func(k dedupe.Key) {
			if _, status, _ := claimNew(ctx, st, k, time.Minute); status == dedupe.Claimed {
				_ = st.Mark(ctx, k, time.Hour)
			}
		})
	}},
	{"lru", func(b *testing.B, keys []dedupe.Key) func() func(dedupe.Key) {
		c := filledBaseline(b, keys[:benchSize])
		return shared(func(k dedupe.Key) { baselineSeen(c, k) })
	}},
	{"lru-claim-mark", func(b *testing.B, keys []dedupe.Key) func() func(dedupe.Key) {
		c := filledBaseline(b, keys[:benchSize])
		return shared(func(k dedupe.Key) { baselineClaimMark(c, k) })
	}},
	{"floor", func(b *testing.B, keys []dedupe.Key) func() func(dedupe.Key) {
		// The least work a Claim then Mark can do with simplelru: its three
		// map operations (Get, Add the claim, Add the mark) with no lock, no
		// clock and no validation, each goroutine on an LRU of its own: a
		// perfectly sharded store that never contends. No one could use it;
		// it bounds what any simplelru-based store can reach here.
		lrus := make(chan *simplelru.LRU[dedupe.Key, int64], runtime.GOMAXPROCS(0))
		for range cap(lrus) {
			l, _ := simplelru.NewLRU[dedupe.Key, int64](benchSize, nil)
			for _, k := range keys[:benchSize] {
				l.Add(k, 1)
			}
			lrus <- l
		}
		return func() func(dedupe.Key) {
			l := <-lrus
			return func(k dedupe.Key) {
				if _, ok := l.Get(k); !ok {
					l.Add(k, 1)
					l.Add(k, 2)
				}
			}
		}
	}},
}

// shared returns a set-up's result for an operation that all goroutines share.
func shared(op func(dedupe.Key)) func() func(dedupe.Key) {
	return func() func(dedupe.Key) { return op }
}

// BenchmarkMemoryClaimMark claims and marks a new key in a full store, so that
// every iteration evicts.
func BenchmarkMemoryClaimMark(b *testing.B) {
	keys := newKeys(1 << 18)
	for _, impl := range claimMarkImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			op := impl.setup(b, keys)()
			b.ReportAllocs()
			b.ResetTimer()
			for i := benchSize; b.Loop(); i++ {
				op(keys[i%len(keys)])
			}
		})
	}
}

// BenchmarkMemoryParallel is BenchmarkMemoryClaimMark from every core at once
// (run it with -cpu 2 or more).
func BenchmarkMemoryParallel(b *testing.B) {
	keys := newKeys(1 << 18)
	var next atomic.Int64
	for _, impl := range claimMarkImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			newOp := impl.setup(b, keys)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				op := newOp()
				for i := int(next.Add(1)) * 7919; pb.Next(); i++ { // each goroutine walks its own part of keys
					op(keys[i%len(keys)])
				}
			})
		})
	}
}

func filledBaseline(b *testing.B, keys []dedupe.Key) *lru.Cache[dedupe.Key, int64] {
	c := newBaseline(b)
	for _, k := range keys {
		baselineSeen(c, k)
	}
	return c
}

func fill(b *testing.B, st dedupe.Store, keys []dedupe.Key) {
	for _, k := range keys {
		if err := st.Mark(context.Background(), k, time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}
