package deduperedis_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// sizeMarks is how many marks BenchmarkBytesPerMark writes: 200,000, or
// 20,000 where CI runs every benchmark once as a smoke test, or
// $DEDUPE_SIZE_MARKS (issue 38's compact figure is for 1,000,000).
func sizeMarks() int {
	if n, err := strconv.Atoi(os.Getenv("DEDUPE_SIZE_MARKS")); err == nil && n > 0 {
		return n
	}
	if os.Getenv("CI") != "" {
		return 20_000
	}
	return 200_000
}

// markUntil writes the keys 0 to n-1 to s with MarkUntil, 1,000 at a time,
// their expiries spread over the next 1 to 24 hours.
func markUntil(b *testing.B, s *deduperedis.Store, n int) {
	const batch = 1000
	now := time.Now()
	for i := 0; i < n; i += batch {
		var keys []dedupe.Key
		var exps []time.Time
		for j := i; j < min(i+batch, n); j++ {
			keys = append(keys, sizeKey(j))
			exps = append(exps, now.Add(time.Hour+23*time.Hour/time.Duration(n)*time.Duration(j))) // 23h*j overflows past j = 111,000
		}
		if _, err := s.MarkUntil(context.Background(), keys, exps); err != nil {
			b.Fatal(err)
		}
	}
}

// sizeKey is the i-th key of the size benchmark: a Telegram message with a
// ten-digit id.
func sizeKey(i int) dedupe.Key {
	return dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + i)}
}

// usedMemory returns the used_memory field of the server's INFO memory.
func usedMemory(b *testing.B, c *redis.Client) int64 {
	b.Helper()
	info, err := c.InfoMap(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(info["Memory"]["used_memory"]), 10, 64)
	if err != nil {
		b.Fatalf("used_memory %q: %v", info["Memory"]["used_memory"], err)
	}
	return n
}

// BenchmarkBytesPerMark reports the server memory a mark takes: the
// used_memory delta of a private redis-server (started by the benchmark, on
// a port of its own) after sizeMarks marks of ten-digit ids
// ("dedupe:telegram:" and 10 digits, 26-byte Redis keys), 24 h TTL, written
// by MarkUntil 1,000 at a time, beside the anchor: the same keys stored the
// simplest way, SET key 1 EX 86400, pipelined 1,000 at a time
// (impl=set-ex). id-B and key-B are the id's and the Redis key's lengths.
// impl=dedupe-compact is the compact layout (Config.Compact), which also
// reports how many of its buckets Redis no longer keeps as a listpack
// (hashtables: 0 is the design).
//
//	go test -run '^$' -bench BytesPerMark -benchtime 1x -count 1 ./deduperedis
func BenchmarkBytesPerMark(b *testing.B) {
	n := sizeMarks()
	fills := []struct {
		name string
		fill func(b *testing.B, c *redis.Client)
	}{
		{"dedupe", func(b *testing.B, c *redis.Client) {
			markUntil(b, newStore(b, c, deduperedis.Config{Prefix: deduperedis.DefaultPrefix}), n)
		}},
		// The compact layout with Config.Shards sized as docs/sizing.md
		// says, the live marks / 64 (the default, 16,384, is for a million).
		{"dedupe-compact", func(b *testing.B, c *redis.Client) {
			cfg := deduperedis.Config{Prefix: deduperedis.DefaultPrefix, Compact: true, Shards: max(n/64, 1)}
			markUntil(b, newStore(b, c, cfg), n)
			b.ReportMetric(float64(hashtables(b, c)), "hashtables")
		}},
		{"set-ex", func(b *testing.B, c *redis.Client) {
			ctx := context.Background()
			for i := 0; i < n; i += 1000 {
				if _, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
					for j := i; j < min(i+1000, n); j++ {
						p.Set(ctx, deduperedis.DefaultPrefix+sizeKey(j).String(), "1", 24*time.Hour)
					}
					return nil
				}); err != nil {
					b.Fatal(err)
				}
			}
		}},
	}
	for _, f := range fills {
		b.Run("impl="+f.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				srv := startServer(b)
				c := newClient(b, srv.Addr(), nil)
				before := usedMemory(b, c)
				f.fill(b, c)
				bytes := usedMemory(b, c) - before
				b.ReportMetric(float64(bytes)/float64(n), "B/mark")
				b.ReportMetric(float64(len(sizeKey(0).MessageID)), "id-B")
				b.ReportMetric(float64(len(deduperedis.DefaultPrefix+sizeKey(0).String())), "key-B")
				srv.kill()
			}
		})
	}
}
