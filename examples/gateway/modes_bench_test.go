package main

import (
	"context"
	"errors"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
	"github.com/gatewaykit/dedupe/postgres"
)

// serverEnv returns the Redis address and the PostgreSQL URL of the test
// servers, or skips tb (fails it when DEDUPE_REQUIRE_SERVERS=1).
func serverEnv(tb testing.TB) (redisAddr, pgURL string) {
	tb.Helper()
	redisAddr, pgURL = os.Getenv("DEDUPE_REDIS_ADDR"), os.Getenv("DEDUPE_POSTGRES_DSN")
	if redisAddr == "" || pgURL == "" {
		skipOrFail(tb, "DEDUPE_REDIS_ADDR and DEDUPE_POSTGRES_DSN are not both set: skipping the Redis-to-PostgreSQL checks "+
			"(for example 127.0.0.1:6379 and postgres://postgres@127.0.0.1:5432/test?sslmode=disable)")
	}
	return redisAddr, pgURL
}

// BenchmarkModes measures the deduplication of a gateway in the modes of the
// ClawBridge design's checklist, through a Deduper whose store is Redis and
// whose fallback is PostgreSQL: normal (Redis up), degraded (Redis down: the
// fallback serves alone, the marks queue for Redis), and layered (a memory
// layer in front of Redis, PostgreSQL still the fallback). 64 handlers run
// Do over a stream of which 30% are copies of recently processed updates;
// deliveries/s is the throughput, to be read as a ratio to mode=normal.
func BenchmarkModes(b *testing.B) {
	redisAddr, pgURL := serverEnv(b)
	ctx := context.Background()
	proxy, err := faultproxy.Start(redisAddr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = proxy.Close() })
	prefix := "dedupe:examples-gateway-bench:" + strconv.FormatInt(time.Now().UnixNano(), 36) + ":"
	rd, err := deduperedis.OpenURL("redis://"+proxy.Addr()+"/0", deduperedis.Config{Prefix: prefix})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rd.Close() })
	pg, err := postgres.Open(ctx, pgURL, postgres.Config{Table: postgresTable})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = pg.Close() })
	front := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: transportWindow})
	layered, err := dedupe.NewLayered(front, rd) // not closed: it would close rd twice
	if err != nil {
		b.Fatal(err)
	}
	modes := []struct {
		name  string
		store dedupe.Store
		down  bool
	}{
		{"normal", rd, false},
		{"degraded", rd, true},
		{"layered", layered, false},
	}
	for _, m := range modes {
		d := dedupe.New(m.store, dedupe.WithFallback(pg), dedupe.WithTTL(time.Hour))
		b.Run("mode="+m.name, func(b *testing.B) {
			if m.down {
				proxy.SetLoss(1)
				proxy.Cut()
				defer proxy.SetLoss(0)
			}
			s := &deliveries{d: d}
			// Untimed: connections dialled, and in the degraded mode the
			// breaker open, as in a gateway some seconds into an outage.
			s.deliver(b, 64, 512)
			b.ResetTimer()
			start := time.Now()
			s.deliver(b, 64, b.N)
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "deliveries/s")
		})
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		if err := d.Flush(ctx); err != nil {
			b.Errorf("mode %s: marks queued for Redis not written: %v", m.name, err)
		}
		cancel()
		_ = d.Close()
	}
}

// deliveries is a stream of updates of which 30% are copies of one processed
// lately, delivered through d.
type deliveries struct {
	d    *dedupe.Deduper
	n    atomic.Int64
	base int64

	mu     sync.Mutex
	recent [1024]int64
	filled int
}

// next returns the next update id, and whether it was processed before.
func (s *deliveries) next() (id int64, dup bool) {
	i := s.n.Add(1)
	if i%10 < 3 {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.filled > 0 {
			return s.recent[(i*7919)%int64(min(s.filled, len(s.recent)))], true
		}
	}
	return s.base + i, false
}

func (s *deliveries) processed(id int64) {
	s.mu.Lock()
	s.recent[s.filled%len(s.recent)] = id
	s.filled++
	s.mu.Unlock()
}

// deliver delivers n updates from callers goroutines.
func (s *deliveries) deliver(b *testing.B, callers, n int) {
	if s.base == 0 {
		s.base = time.Now().UnixNano()
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				id, dup := s.next()
				k := dedupe.Key{Channel: "telegram", MessageID: strconv.FormatInt(id, 10)}
				err := s.d.Do(context.Background(), k, func(context.Context) error { return nil })
				switch {
				case dup && errors.Is(err, dedupe.ErrDuplicate):
				case !dup && err == nil:
					s.processed(id)
				default:
					b.Errorf("delivery of %s (a copy: %t): %v", k, dup, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
