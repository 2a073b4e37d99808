package deduperedis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// layouts are the two layouts the compact benchmarks compare, the plain one
// first: the baseline.
var layouts = []struct {
	name    string
	compact bool
}{{"plain", false}, {"compact", true}}

// BenchmarkCompact measures, on the shared test server, Claim then Mark of
// new keys and Exists of marked keys by 64 callers, on the plain layout (the
// baseline) and the compact one ([deduperedis.Config.Compact]), one after the
// other in the same run. Compare the two layouts' keys/s run by run.
func BenchmarkCompact(b *testing.B) {
	client := benchClient(b)
	ctx := context.Background()
	for _, l := range layouts {
		w := &claimMark{client: client, prefix: "dedupe-bench-credis:" + randomID(b) + ":"}
		w.st = newStore(b, client, deduperedis.Config{Prefix: w.prefix, TTL: benchTTL, Lease: benchTTL, Compact: l.compact})
		warmUp(b, w.store)
		b.Run("op=claimmark/layout="+l.name, func(b *testing.B) { callers(b, 64, w.store) })
	}
	const present = 1024
	for _, l := range layouts {
		st := newStore(b, client, deduperedis.Config{Prefix: "dedupe-bench-credis:" + randomID(b) + ":",
			TTL: benchTTL, Compact: l.compact})
		keys := make([]dedupe.Key, present)
		for i := range keys {
			keys[i] = dedupe.Key{Channel: "bench", MessageID: strconv.Itoa(1_000_000_000 + i)}
		}
		for _, err := range st.MarkEach(ctx, keys, nil, 0) {
			if err != nil {
				b.Fatal(err)
			}
		}
		exists := func(ctx context.Context, i uint64) error {
			k := keys[i%present]
			if ok, err := st.Exists(ctx, k); !ok || err != nil {
				return fmt.Errorf("Exists(%s) = %v, %v", k, ok, err)
			}
			return nil
		}
		warmUp(b, exists)
		b.Run("op=exists/layout="+l.name, func(b *testing.B) { callers(b, 64, exists) })
	}
}

// bytesMarks is how many marks BenchmarkBytesPerMark writes: issue 38's
// figure is for a million.
const bytesMarks = 1_000_000

// BenchmarkBytesPerMark writes a million marks of ten-digit message ids
// ("telegram", "1000000000"…: 19 bytes of key text), with a TTL of 24 h, to
// a private redis-server (port 6390 or the next free one up to 6399, else
// any), on each layout after a FLUSHALL, and reports the growth of
// used_memory per mark (B/mark), beside the key's text (key-B), and how many
// buckets Redis no longer keeps as a listpack (hashtables, compact layout).
// Run it with -benchtime 1x: each iteration writes the million again.
func BenchmarkBytesPerMark(b *testing.B) {
	srv := startServerOn(b, []int{6390, 6391, 6392, 6393, 6394, 6395, 6396, 6397, 6398, 6399})
	client := newClient(b, srv.Addr(), func(o *redis.Options) { o.PoolSize = 8 })
	ctx := context.Background()
	for _, l := range layouts {
		b.Run("layout="+l.name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if err := client.FlushAll(ctx).Err(); err != nil {
					b.Fatal(err)
				}
				st := newStore(b, client, deduperedis.Config{Prefix: "dedupe:", TTL: 24 * time.Hour, Compact: l.compact})
				before := usedMemory(b, client)
				writeMarks(b, st, bytesMarks)
				b.ReportMetric(float64(usedMemory(b, client)-before)/bytesMarks, "B/mark")
				b.ReportMetric(float64(len("telegram:1000000000")), "key-B")
				b.ReportMetric(float64(hashtables(b, client)), "hashtables")
			}
		})
	}
}

// writeMarks marks n keys of ten-digit ids on st, 1,000 per MarkEach.
func writeMarks(b *testing.B, st *deduperedis.Store, n int) {
	keys := make([]dedupe.Key, 1000)
	for done := 0; done < n; done += len(keys) {
		for i := range keys {
			keys[i] = dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + done + i)}
		}
		for _, err := range st.MarkEach(context.Background(), keys, nil, 0) {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
}

// usedMemory returns the server's used_memory (INFO memory).
func usedMemory(b *testing.B, client *redis.Client) int64 {
	info, err := client.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("INFO memory without used_memory")
	return 0
}

// hashtables returns how many hashes of the server Redis keeps as a
// hashtable, not a listpack.
func hashtables(b *testing.B, client *redis.Client) int64 {
	ctx := context.Background()
	var n atomic.Int64
	iter := client.ScanType(ctx, 0, "*", 1000, "hash").Iterator()
	for iter.Next(ctx) {
		if enc, err := client.ObjectEncoding(ctx, iter.Val()).Result(); err == nil && enc == "hashtable" {
			n.Add(1)
		}
	}
	if err := iter.Err(); err != nil {
		b.Fatal(err)
	}
	return n.Load()
}
