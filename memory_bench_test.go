package dedupe_test

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// The memory benchmarks put the store beside what a gateway author would use
// instead, in one run, so that each figure is read as a ratio:
//
//   - expirable: golang-lru's expirable.LRU, checked with Get and filled with
//     Add (two steps, not atomic);
//   - watermill: the algorithm of Watermill's in-memory deduplicator
//     (middleware.NewMapExpiringKeyRepository): one map of expiry times
//     behind one mutex, checked and filled in one step, swept by a ticker;
//   - same-steps: one simplelru behind one mutex doing what Claim then Mark
//     do, with the same clock reads: an atomic claim with a token, then a
//     mark. The store's sharding, pinned claims and validation are what it
//     adds to these steps.

const benchSize = 10000

// watermillMap is Watermill's map repository, rewritten for these benchmarks:
// IsDuplicate looks the key up and, if absent, stores its expiry, under one
// mutex; a goroutine deletes expired keys every half window. Like the
// original it has no size bound.
type watermillMap struct {
	window time.Duration
	mu     sync.Mutex
	tags   map[dedupe.Key]time.Time
	stop   chan struct{}
}

func newWatermillMap(window time.Duration) *watermillMap {
	m := &watermillMap{window: window, tags: make(map[dedupe.Key]time.Time), stop: make(chan struct{})}
	go func() {
		t := time.NewTicker(window / 2)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case now := <-t.C:
				m.mu.Lock()
				for k, exp := range m.tags {
					if exp.Before(now) {
						delete(m.tags, k)
					}
				}
				m.mu.Unlock()
			}
		}
	}()
	return m
}

func (m *watermillMap) IsDuplicate(k dedupe.Key) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.tags[k]; ok {
		return true
	}
	m.tags[k] = time.Now().Add(m.window)
	return false
}

// sameSteps is one simplelru behind one mutex, holding for each key its
// expiry and, for a claim, its token.
type sameSteps struct {
	mu  sync.Mutex
	lru *simplelru.LRU[dedupe.Key, sameStepsEntry]
}

type sameStepsEntry struct {
	expires int64
	token   string
}

func newSameSteps() *sameSteps {
	l, _ := simplelru.NewLRU[dedupe.Key, sameStepsEntry](benchSize, nil)
	return &sameSteps{lru: l}
}

// claim takes k for token unless a live mark or claim holds it.
func (s *sameSteps) claim(k dedupe.Key, token string, lease time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixNano()
	if e, ok := s.lru.Get(k); ok && now < e.expires {
		return false
	}
	s.lru.Add(k, sameStepsEntry{expires: now + int64(lease), token: token})
	return true
}

func (s *sameSteps) mark(k dedupe.Key, ttl time.Duration) {
	s.mu.Lock()
	s.lru.Add(k, sameStepsEntry{expires: time.Now().UnixNano() + int64(ttl)})
	s.mu.Unlock()
}

// contender is one implementation in a benchmark: setup fills it with the
// first benchSize keys and returns the operation every goroutine runs on new
// keys, and a function to tear it down.
type contender struct {
	name  string
	setup func(b *testing.B, keys []dedupe.Key) (op func(dedupe.Key), done func())
}

// checkSetImpls check whether a key was seen and remember it if not: the
// hand-written dedupe of a gateway that has no Claim.
var checkSetImpls = []contender{
	{"dedupe", func(b *testing.B, keys []dedupe.Key) (func(dedupe.Key), func()) {
		ctx := context.Background()
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize})
		for _, k := range keys[:benchSize] {
			_ = st.Mark(ctx, k, time.Hour)
		}
		return func(k dedupe.Key) {
			if ok, _ := st.Exists(ctx, k); !ok {
				_ = st.Mark(ctx, k, time.Hour)
			}
		}, func() { _ = st.Close() }
	}},
	{"expirable", func(b *testing.B, keys []dedupe.Key) (func(dedupe.Key), func()) {
		c := expirable.NewLRU[dedupe.Key, struct{}](benchSize, nil, time.Hour)
		for _, k := range keys[:benchSize] {
			c.Add(k, struct{}{})
		}
		return func(k dedupe.Key) {
			if _, ok := c.Get(k); !ok {
				c.Add(k, struct{}{})
			}
		}, func() {}
	}},
	{"watermill", func(b *testing.B, keys []dedupe.Key) (func(dedupe.Key), func()) {
		m := newWatermillMap(time.Hour)
		for _, k := range keys[:benchSize] {
			m.IsDuplicate(k)
		}
		return func(k dedupe.Key) { m.IsDuplicate(k) }, func() { close(m.stop) }
	}},
}

// claimMarkImpls claim a key and, if that succeeded, mark it: what
// Deduper.Do asks of its store for each message.
var claimMarkImpls = []contender{
	{"dedupe", func(b *testing.B, keys []dedupe.Key) (func(dedupe.Key), func()) {
		ctx := context.Background()
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize})
		for _, k := range keys[:benchSize] {
			_ = st.Mark(ctx, k, time.Hour)
		}
		return func(k dedupe.Key) {
			c := dedupe.NewClaim(k)
			if status, _ := st.Claim(ctx, c, time.Minute); status == dedupe.Claimed {
				_ = st.Mark(ctx, k, time.Hour)
			}
		}, func() { _ = st.Close() }
	}},
	{"same-steps", func(b *testing.B, keys []dedupe.Key) (func(dedupe.Key), func()) {
		s := newSameSteps()
		for _, k := range keys[:benchSize] {
			s.mark(k, time.Hour)
		}
		return func(k dedupe.Key) {
			c := dedupe.NewClaim(k)
			if s.claim(k, c.Token, time.Minute) {
				s.mark(k, time.Hour)
			}
		}, func() {}
	}},
}

// BenchmarkMemoryExists looks up present keys.
func BenchmarkMemoryExists(b *testing.B) {
	ctx := context.Background()
	keys := newKeys(1000)
	b.Run("impl=dedupe", func(b *testing.B) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize})
		for _, k := range keys {
			_ = st.Mark(ctx, k, time.Hour)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if ok, _ := st.Exists(ctx, keys[i%len(keys)]); !ok {
				b.Fatal("missing")
			}
		}
	})
	b.Run("impl=expirable", func(b *testing.B) {
		c := expirable.NewLRU[dedupe.Key, struct{}](benchSize, nil, time.Hour)
		for _, k := range keys {
			c.Add(k, struct{}{})
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, ok := c.Get(keys[i%len(keys)]); !ok {
				b.Fatal("missing")
			}
		}
	})
}

// BenchmarkMemoryExistsMark checks and marks new keys in a full store, so
// that every iteration evicts (or, for watermill, grows its map).
func BenchmarkMemoryExistsMark(b *testing.B) { runSerial(b, checkSetImpls) }

// BenchmarkMemoryExistsMarkParallel is BenchmarkMemoryExistsMark from every
// core at once (run it with -cpu 1,2).
func BenchmarkMemoryExistsMarkParallel(b *testing.B) { runParallel(b, checkSetImpls) }

// BenchmarkMemoryClaimMark claims and marks new keys in a full store.
func BenchmarkMemoryClaimMark(b *testing.B) { runSerial(b, claimMarkImpls) }

// BenchmarkMemoryClaimMarkParallel is BenchmarkMemoryClaimMark from every core
// at once (run it with -cpu 1,2).
func BenchmarkMemoryClaimMarkParallel(b *testing.B) { runParallel(b, claimMarkImpls) }

func runSerial(b *testing.B, impls []contender) {
	keys := newKeys(1 << 18)
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			op, done := impl.setup(b, keys)
			defer done()
			b.ReportAllocs()
			for i := benchSize; b.Loop(); i++ {
				op(keys[i%len(keys)])
			}
		})
	}
}

func runParallel(b *testing.B, impls []contender) {
	keys := newKeys(1 << 18)
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			op, done := impl.setup(b, keys)
			defer done()
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				// Each goroutine walks its own part of the keys.
				for i := benchSize + int(next.Add(1))*(len(keys)/runtime.GOMAXPROCS(0)+7); pb.Next(); i++ {
					op(keys[i%len(keys)])
				}
			})
		})
	}
}
