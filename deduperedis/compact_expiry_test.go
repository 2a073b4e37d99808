package deduperedis_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// markPaths are the ways a compact store marks a key for ttl.
var markPaths = []struct {
	name string
	mark func(ctx context.Context, s *deduperedis.Store, k dedupe.Key, ttl time.Duration) error
}{
	{"Mark", func(ctx context.Context, s *deduperedis.Store, k dedupe.Key, ttl time.Duration) error {
		return s.Mark(ctx, k, ttl)
	}},
	{"MarkResult", func(ctx context.Context, s *deduperedis.Store, k dedupe.Key, ttl time.Duration) error {
		return s.MarkResult(ctx, k, []byte("result of "+k.MessageID), ttl)
	}},
	{"MarkEach", func(ctx context.Context, s *deduperedis.Store, k dedupe.Key, ttl time.Duration) error {
		return s.MarkEach(ctx, []dedupe.Key{k}, nil, ttl)[0]
	}},
	{"MarkUntil", func(ctx context.Context, s *deduperedis.Store, k dedupe.Key, ttl time.Duration) error {
		_, err := s.MarkUntil(ctx, []dedupe.Key{k}, []time.Time{time.Now().Add(ttl)})
		return err
	}},
	{"scripted Mark", func(ctx context.Context, s *deduperedis.Store, k dedupe.Key, ttl time.Duration) error {
		deduperedis.UseScripts(s)
		return s.Mark(ctx, k, ttl)
	}},
}

// shortBuckets checks every bucket under prefix against its fields, at now
// on the gateway's clock: it returns how many buckets it read, and a line
// for each that has no expiry or expires before its latest live mark, by
// more than slack.
func shortBuckets(t *testing.T, client redis.UniversalClient, prefix string, now time.Time, slack time.Duration) (int, []string) {
	t.Helper()
	ctx := context.Background()
	var n int
	var short []string
	for _, k := range keysUnder(t, client, prefix) {
		if !strings.HasSuffix(k, "}m") {
			continue
		}
		n++
		fields, err := client.HGetAll(ctx, k).Result()
		require.NoError(t, err)
		left, err := client.PTTL(ctx, k).Result()
		require.NoError(t, err)
		var latest int64
		for _, v := range fields {
			e, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err, "field of %s", k)
			latest = max(latest, e)
		}
		need := time.Duration(latest-now.UnixMilli()) * time.Millisecond
		switch {
		case need <= 0:
		case left == -1:
			short = append(short, fmt.Sprintf("%s: no expiry, latest mark in %v", k, need))
		case left < need-slack:
			short = append(short, fmt.Sprintf("%s: expires in %v, latest mark in %v", k, left, need))
		}
	}
	return n, short
}

// TestCompactBucketOutlivesMarks checks that a bucket's expiry never falls
// below its latest live mark, whatever happened to the bucket and whichever
// path marks it: the bucket is emptied by Forget, or deleted as FLUSHALL or
// a restart without persistence deletes it; a store that remembers having
// set its expiry marks a key for an hour in it, which makes it again; then
// another store, which does not remember the bucket, marks a key for 3 s.
func TestCompactBucketOutlivesMarks(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	ctx := context.Background()
	scenarios := []struct {
		name   string
		before func(t *testing.T, a *deduperedis.Store, bucket string)
	}{
		{"forgotten", func(t *testing.T, a *deduperedis.Store, _ string) {
			k := dedupe.Key{Channel: "telegram", MessageID: "forgotten"}
			require.NoError(t, a.Mark(ctx, k, time.Hour))
			forgot, err := a.Forget(ctx, k)
			require.NoError(t, err)
			require.True(t, forgot)
		}},
		{"deleted", func(t *testing.T, a *deduperedis.Store, bucket string) {
			require.NoError(t, a.Mark(ctx, dedupe.Key{Channel: "telegram", MessageID: "deleted"}, time.Hour))
			require.NoError(t, client.Del(ctx, bucket).Err())
		}},
	}
	var short []string
	for _, sc := range scenarios {
		for _, path := range markPaths {
			t.Run(sc.name+"/"+path.name, func(t *testing.T) {
				prefix := "dedupe-test-credis:" + randomID(t) + ":"
				t.Cleanup(func() { client.Del(ctx, keysUnder(t, client, prefix)...) })
				cfg := deduperedis.Config{Prefix: prefix, Compact: true, Shards: 1}
				a, b := newStore(t, client, cfg), newStore(t, client, cfg)
				sc.before(t, a, prefix+"{0}m")
				long := dedupe.Key{Channel: "telegram", MessageID: "long"}
				require.NoError(t, a.Mark(ctx, long, time.Hour))
				require.NoError(t, path.mark(ctx, b, dedupe.Key{Channel: "telegram", MessageID: "short"}, 3*time.Second))
				n, bad := shortBuckets(t, client, prefix, time.Now(), time.Second)
				require.Equal(t, 1, n, "buckets")
				assert.Empty(t, bad, "buckets that expire before their marks")
				short = append(short, bad...)
				marked, err := b.Exists(ctx, long)
				require.NoError(t, err)
				assert.True(t, marked, "the hour's mark")
			})
		}
	}
	t.Logf("buckets that expire before their marks: %d of %d", len(short), len(scenarios)*len(markPaths))
}

// TestCompactBucketsAfterFlush marks a key in every bucket of a private
// server, empties the server (FLUSHALL, or a restart without persistence),
// has the same store mark a key for an hour in every bucket again, which
// makes them again, then another store mark a key for 3 s in each: no
// bucket may be left without an expiry, nor expire before its marks.
func TestCompactBucketsAfterFlush(t *testing.T) {
	redisAddr(t)
	for _, empty := range []string{"FLUSHALL", "restart"} {
		t.Run(empty, func(t *testing.T) {
			srv := startServer(t)
			client := newClient(t, srv.Addr(), nil)
			ctx := context.Background()
			const shards, keys = 256, 4096
			cfg := deduperedis.Config{Prefix: "dedupe-test-credis:", Compact: true, Shards: shards}
			a := newStore(t, newClient(t, srv.Addr(), nil), cfg)
			markAll := func(s *deduperedis.Store, round string, ttl time.Duration) {
				var wg sync.WaitGroup
				for w := range 8 {
					wg.Go(func() {
						for i := w; i < keys; i += 8 {
							k := dedupe.Key{Channel: round, MessageID: strconv.Itoa(i)}
							assert.NoError(t, s.Mark(ctx, k, ttl), "Mark %s", k)
						}
					})
				}
				wg.Wait()
			}
			markAll(a, "before", time.Hour)
			if empty == "FLUSHALL" {
				require.NoError(t, client.FlushAll(ctx).Err())
			} else {
				srv.kill()
				srv.restart()
			}
			markAll(a, "after", time.Hour)
			n, bad := shortBuckets(t, client, cfg.Prefix, time.Now(), time.Second)
			t.Logf("%s, then an hour's marks: %d of %d buckets without an expiry or short", empty, len(bad), n)
			assert.Equal(t, shards, n, "buckets")
			assert.Empty(t, bad, "buckets without an expiry or expiring before their marks")

			b := newStore(t, newClient(t, srv.Addr(), nil), cfg)
			markAll(b, "short", 3*time.Second)
			n, bad = shortBuckets(t, client, cfg.Prefix, time.Now(), time.Second)
			t.Logf("then 3 s marks by another store: %d of %d buckets without an expiry or short", len(bad), n)
			assert.Empty(t, bad, "buckets without an expiry or expiring before their marks")
		})
	}
}

// TestCompactClockSkew runs gateways whose clock is 180 s behind the
// server's, and 180 s ahead of it, marking 200 keys for 2 minutes by every
// path: the gateway's clock decides when a mark ends, and the server's
// clock must not end one sooner. Each bucket must last at least as long as
// its latest mark has left on the gateway's clock, and not much longer;
// every key must be a duplicate, and a result kept with a mark must be
// there; once the gateway's clock passes the marks' end, they are gone.
func TestCompactClockSkew(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	ctx := context.Background()
	const ttl, keys = 2 * time.Minute, 200
	for _, tc := range []struct {
		name string
		skew time.Duration // the gateway's clock minus the server's
	}{
		{"server ahead", -180 * time.Second},
		{"server behind", 180 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "dedupe-test-credis:" + randomID(t) + ":"
			t.Cleanup(func() { client.Del(ctx, keysUnder(t, client, prefix)...) })
			var later atomic.Int64 // how far the test moved the gateway's clock on
			clock := func() time.Time { return time.Now().Add(tc.skew + time.Duration(later.Load())) }
			cfg := deduperedis.Config{Prefix: prefix, Compact: true, Shards: 16}
			stores := make([]*deduperedis.Store, len(markPaths))
			for i := range stores {
				stores[i] = newStore(t, client, cfg)
				deduperedis.SetClock(stores[i], clock)
			}
			key := func(i int) dedupe.Key { return dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(i)} }
			for i := range keys {
				p := i % len(markPaths)
				require.NoError(t, markPaths[p].mark(ctx, stores[p], key(i), ttl), "%s %d", markPaths[p].name, i)
			}
			n, bad := shortBuckets(t, client, prefix, clock(), time.Second)
			assert.Empty(t, bad, "buckets expiring before their marks on the gateway's clock")
			for _, k := range keysUnder(t, client, prefix) {
				if left, err := client.PTTL(ctx, k).Result(); err == nil && strings.HasSuffix(k, "}m") {
					assert.LessOrEqual(t, left, ttl+time.Minute, "PTTL of %s: the mark's TTL rounded up to a minute at most", k)
				}
			}
			gone, lost := 0, 0
			for i := range keys {
				st, err := stores[0].Claim(ctx, dedupe.NewClaim(key(i)), time.Minute)
				require.NoError(t, err)
				if st != dedupe.Duplicate {
					gone++
				}
				if markPaths[i%len(markPaths)].name == "MarkResult" {
					r, marked, err := stores[0].Result(ctx, key(i))
					require.NoError(t, err)
					if !marked || string(r) != "result of "+key(i).MessageID {
						lost++
					}
				}
			}
			t.Logf("%s by 180 s: %d buckets, %d short; %d of %d marks gone, %d results lost", tc.name, n, len(bad), gone, keys, lost)
			assert.Zero(t, gone, "marks gone of %d", keys)
			assert.Zero(t, lost, "results lost")

			later.Store(int64(ttl + time.Second))
			for i := range keys {
				marked, err := stores[0].Exists(ctx, key(i))
				require.NoError(t, err)
				require.False(t, marked, "mark %d after its end on the gateway's clock", i)
			}
		})
	}
}
