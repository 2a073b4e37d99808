package dedupe_test

import (
	"context"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
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
//   - watermill: Watermill's in-memory deduplicator
//     (middleware.NewMapExpiringKeyRepository), rewritten here line for line:
//     one map of expiry times keyed by the caller's string, behind one mutex,
//     checked and filled in one step, swept by a ticker;
//   - same-steps: one simplelru behind one mutex doing what Claim then Mark
//     do, with the same clock reads and the same caller-made token: an atomic
//     claim with a token, then a mark. The store's sharding, pinned claims and
//     validation are what it adds to these steps.
//
// Every operation is on a key never seen before (18-byte ids, made before the
// timer starts), in a store already holding benchSize keys, so that a bounded
// store evicts at every step and an unbounded one (watermill) grows rather
// than turning into lookups.

const benchSize = 10000

// quiet is the logger of the benchmarks' stores, which evict live marks at
// every step and would warn so.
var quiet = slog.New(slog.DiscardHandler)

// watermillMap is Watermill's mapExpiringKeyRepository: IsDuplicate looks the
// key up and, if absent, stores its expiry, under one mutex; a goroutine
// deletes expired keys every half window. Like the original it has no size
// bound and never checks an expiry on lookup.
type watermillMap struct {
	window time.Duration
	mu     *sync.Mutex
	tags   map[string]time.Time
	stop   chan struct{}
}

func newWatermillMap(window time.Duration) *watermillMap {
	m := &watermillMap{window: window, mu: &sync.Mutex{}, tags: make(map[string]time.Time), stop: make(chan struct{})}
	go func() {
		t := time.NewTicker(window / 2)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case before := <-t.C:
				m.mu.Lock()
				for k, exp := range m.tags {
					if exp.Before(before) {
						delete(m.tags, k)
					}
				}
				m.mu.Unlock()
			}
		}
	}()
	return m
}

func (m *watermillMap) IsDuplicate(_ context.Context, key string) (bool, error) {
	m.mu.Lock()
	if _, seen := m.tags[key]; seen {
		m.mu.Unlock()
		return true, nil
	}
	m.tags[key] = time.Now().Add(m.window)
	m.mu.Unlock()
	return false, nil
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

// benchKeys are the keys of one benchmark run: the first benchSize fill the
// store, the others are new. text holds each key's string form, for the peers
// keyed by a string.
type benchKeys struct {
	keys []dedupe.Key
	text []string
}

// newBenchKeys makes n keys with distinct 18-byte message ids.
func newBenchKeys(n int) benchKeys {
	bk := benchKeys{keys: make([]dedupe.Key, n), text: make([]string, n)}
	for i := range bk.keys {
		bk.keys[i] = dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(100_000_000_000_000_000 + i)}
		bk.text[i] = bk.keys[i].String()
	}
	return bk
}

// contender is one implementation in a benchmark: setup fills it with the
// first benchSize keys and returns the operation on key i, and a function to
// tear it down.
type contender struct {
	name  string
	setup func(bk benchKeys) (op func(i int), done func())
}

// checkSetImpls check whether a key was seen and remember it if not: the
// hand-written dedupe of a gateway that has no Claim.
var checkSetImpls = []contender{
	{"dedupe", func(bk benchKeys) (func(int), func()) {
		ctx := context.Background()
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize, Logger: quiet})
		for _, k := range bk.keys[:benchSize] {
			_ = st.Mark(ctx, k, time.Hour)
		}
		return func(i int) {
			k := bk.keys[i]
			if ok, _ := st.Exists(ctx, k); !ok {
				_ = st.Mark(ctx, k, time.Hour)
			}
		}, func() { _ = st.Close() }
	}},
	{"expirable", func(bk benchKeys) (func(int), func()) {
		c := expirable.NewLRU[dedupe.Key, struct{}](benchSize, nil, time.Hour)
		for _, k := range bk.keys[:benchSize] {
			c.Add(k, struct{}{})
		}
		return func(i int) {
			k := bk.keys[i]
			if _, ok := c.Get(k); !ok {
				c.Add(k, struct{}{})
			}
		}, func() {}
	}},
	{"watermill", func(bk benchKeys) (func(int), func()) {
		ctx := context.Background()
		m := newWatermillMap(time.Hour)
		for _, s := range bk.text[:benchSize] {
			_, _ = m.IsDuplicate(ctx, s)
		}
		return func(i int) { _, _ = m.IsDuplicate(ctx, bk.text[i]) }, func() { close(m.stop) }
	}},
}

// claimMarkImpls claim a key and, if that succeeded, mark it: what
// Deduper.Do asks of its store for each message.
var claimMarkImpls = []contender{
	{"dedupe", func(bk benchKeys) (func(int), func()) {
		ctx := context.Background()
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize, Logger: quiet})
		for _, k := range bk.keys[:benchSize] {
			_ = st.Mark(ctx, k, time.Hour)
		}
		return func(i int) {
			c := dedupe.NewClaim(bk.keys[i])
			if status, _ := st.Claim(ctx, c, time.Minute); status == dedupe.Claimed {
				_ = st.Mark(ctx, c.Key, time.Hour)
			}
		}, func() { _ = st.Close() }
	}},
	{"same-steps", func(bk benchKeys) (func(int), func()) {
		s := newSameSteps()
		for _, k := range bk.keys[:benchSize] {
			s.mark(k, time.Hour)
		}
		return func(i int) {
			c := dedupe.NewClaim(bk.keys[i])
			if s.claim(c.Key, c.Token, time.Minute) {
				s.mark(c.Key, time.Hour)
			}
		}, func() {}
	}},
}

// BenchmarkMemoryExists looks up present keys.
func BenchmarkMemoryExists(b *testing.B) {
	ctx := context.Background()
	keys := newBenchKeys(1000).keys
	b.Run("impl=dedupe", func(b *testing.B) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: benchSize, Logger: quiet})
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
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			op, done := impl.setup(newBenchKeys(benchSize + b.N))
			defer done()
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for i := benchSize; i < benchSize+b.N; i++ {
				op(i)
			}
			reportCPU(b, cpu)
		})
	}
}

// parallelChunk is how many new keys a goroutine of runParallel takes at a
// time from the shared counter.
const parallelChunk = 64

func runParallel(b *testing.B, impls []contender) {
	for _, impl := range impls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			n := benchSize + b.N + parallelChunk*(runtime.GOMAXPROCS(0)+1)
			op, done := impl.setup(newBenchKeys(n))
			defer done()
			var next atomic.Int64
			next.Store(benchSize)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			defer reportCPU(b, cpu)
			b.RunParallel(func(pb *testing.PB) {
				i, end := 0, 0
				for pb.Next() {
					if i == end {
						end = int(next.Add(parallelChunk))
						i = end - parallelChunk
					}
					op(i)
					i++
				}
			})
		})
	}
}

// cpuTime returns the CPU time the process has used, every thread's.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per operation since start, the garbage
// collector's included. On a machine shared with other work it is far
// steadier than the wall-clock time, which counts the time the benchmark
// waited for a core; for the parallel benchmarks it is the CPU time of every
// core together, a measure of throughput.
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// heapKeys is the number of marks BenchmarkMemoryHeapPerKey holds.
const heapKeys = 1_000_000

// BenchmarkMemoryHeapPerKey reports the heap a store holds per remembered key
// (its 18-byte id included) once it holds heapKeys marks, from
// runtime.MemStats after a GC. Run it with -benchtime 1x.
func BenchmarkMemoryHeapPerKey(b *testing.B) {
	ctx := context.Background()
	for _, impl := range []struct {
		name string
		fill func() (keep any)
	}{
		{"dedupe", func() any {
			st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: heapKeys})
			for i := range heapKeys {
				_ = st.Mark(ctx, heapKey(i), time.Hour)
			}
			return st
		}},
		{"expirable", func() any {
			c := expirable.NewLRU[dedupe.Key, struct{}](heapKeys, nil, time.Hour)
			for i := range heapKeys {
				c.Add(heapKey(i), struct{}{})
			}
			return c
		}},
	} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				before := heapInUse()
				keep := impl.fill()
				after := heapInUse()
				runtime.KeepAlive(keep)
				b.ReportMetric(float64(after-before)/heapKeys, "B/key")
			}
		})
	}
}

// heapKey returns a key with an 18-byte id of its own.
func heapKey(i int) dedupe.Key {
	return dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(100_000_000_000_000_000 + i)}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
