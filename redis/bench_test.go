package redis_test

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/redis"
)

// callers is the number of concurrent callers in the parallel benchmarks, as
// many as a busy gateway's webhook handlers.
const callers = 64

// benchTTL is the TTL and lease of the benchmarks' keys: long enough for the
// run, short enough that Redis drops them soon after.
const benchTTL = 10 * time.Second

// parallel runs body from callers goroutines (b.RunParallel starts
// parallelism × GOMAXPROCS of them).
func parallel(b *testing.B, body func(pb *testing.PB)) {
	p := runtime.GOMAXPROCS(0)
	b.SetParallelism((callers + p - 1) / p)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(body)
}

// benchClient returns a client of the test server whose pool is filled, so
// that the first sub-benchmark does not pay for dialling.
func benchClient(b *testing.B) *goredis.Client {
	client := newClient(b, redisAddr(b), nil)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 4 {
				client.Ping(ctx)
			}
		}()
	}
	wg.Wait()
	return client
}

// BenchmarkClaimMark measures the store's Claim then Mark of new keys beside
// the raw commands that do the same with the same client: SET key token NX PX,
// then SET key m PX.
func BenchmarkClaimMark(b *testing.B) {
	client := benchClient(b)
	ctx := context.Background()
	run := randomID(b)
	var n atomic.Uint64

	b.Run("impl=store", func(b *testing.B) {
		st := newStore(b, client, redis.Config{Prefix: "dedupe-bench:" + run + ":", TTL: benchTTL, Lease: benchTTL})
		parallel(b, func(pb *testing.PB) {
			for pb.Next() {
				k := dedupe.Key{Channel: "bench", MessageID: strconv.FormatUint(n.Add(1), 10)}
				_, cSt, err := claimNew(ctx, st, k, 0)
				if err != nil || cSt != dedupe.Claimed {
					b.Errorf("Claim(%s) = %v, %v", k, cSt, err)
					return
				}
				if err := st.Mark(ctx, k, 0); err != nil {
					b.Errorf("Mark(%s): %v", k, err)
					return
				}
			}
		})
	})

	b.Run("impl=raw", func(b *testing.B) {
		prefix := "dedupe-bench:" + run + ":raw:bench:"
		const token = "c:0123456789abcdef0123456789abcdef"
		parallel(b, func(pb *testing.PB) {
			for pb.Next() {
				key := prefix + strconv.FormatUint(n.Add(1), 10)
				ok, err := client.SetNX(ctx, key, token, benchTTL).Result()
				if err != nil || !ok {
					b.Errorf("SET %s NX = %v, %v", key, ok, err)
					return
				}
				if err := client.Set(ctx, key, "m", benchTTL).Err(); err != nil {
					b.Errorf("SET %s: %v", key, err)
					return
				}
			}
		})
	})
}

// BenchmarkExists measures Exists of a marked key beside a raw GET of it.
func BenchmarkExists(b *testing.B) {
	client := benchClient(b)
	ctx := context.Background()
	st := newStore(b, client, redis.Config{Prefix: "dedupe-bench:" + randomID(b) + ":", TTL: benchTTL})
	k := dedupe.Key{Channel: "bench", MessageID: "present"}
	if err := st.Mark(ctx, k, 0); err != nil {
		b.Fatal(err)
	}
	rawKey := "dedupe-bench:" + randomID(b) + ":raw:bench:present"
	if err := client.Set(ctx, rawKey, "m", benchTTL).Err(); err != nil {
		b.Fatal(err)
	}

	b.Run("impl=store", func(b *testing.B) {
		parallel(b, func(pb *testing.PB) {
			for pb.Next() {
				if ok, err := st.Exists(ctx, k); !ok || err != nil {
					b.Errorf("Exists = %v, %v", ok, err)
					return
				}
			}
		})
	})

	b.Run("impl=raw", func(b *testing.B) {
		parallel(b, func(pb *testing.PB) {
			for pb.Next() {
				if v, err := client.Get(ctx, rawKey).Result(); v != "m" || err != nil {
					b.Errorf("GET = %q, %v", v, err)
					return
				}
			}
		})
	})
}
