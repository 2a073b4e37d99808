package deduperedis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// TestCompactLayout checks what the compact layout writes, by reading Redis
// directly: buckets that are listpack hashes of 8-byte fingerprints, each
// with its expiry, spread over at most Shards shards, each bucket expiring
// with its latest mark, rounded up by at most an eighth of the TTL; claims
// as strings; and ListMarks refused.
func TestCompactLayout(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	prefix := "dedupe-test-credis:" + randomID(t) + ":"
	const shards, ttl = 4, time.Hour
	s := newStore(t, client, deduperedis.Config{Prefix: prefix, TTL: ttl, Compact: true, Shards: shards})
	ctx := context.Background()
	keys := make([]dedupe.Key, 200)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + i)}
	}
	for _, err := range s.MarkEach(ctx, keys, nil, 0) {
		require.NoError(t, err)
	}
	c, st, err := claimNew(ctx, s, dedupe.Key{Channel: "telegram", MessageID: "claimed"}, 0)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, st)
	found := keysUnder(t, client, prefix)
	t.Cleanup(func() { client.Del(ctx, found...) })

	tags := map[string]bool{}
	fields, claims := 0, 0
	for _, k := range found {
		tag, rest, ok := strings.Cut(strings.TrimPrefix(k, prefix+"{"), "}")
		require.True(t, ok, "key %q has no shard tag", k)
		tags[tag] = true
		switch {
		case rest == "m":
			enc, err := client.ObjectEncoding(ctx, k).Result()
			require.NoError(t, err)
			assert.Equal(t, "listpack", enc, "encoding of bucket %s", k)
			h, err := client.HGetAll(ctx, k).Result()
			require.NoError(t, err)
			now := time.Now()
			for f, v := range h {
				assert.Len(t, f, 8, "fingerprint in %s", k)
				ms, err := strconv.ParseInt(v, 10, 64)
				require.NoError(t, err, "expiry of a mark in %s", k)
				exp := time.UnixMilli(ms)
				assert.True(t, exp.After(now.Add(ttl-time.Minute)) && exp.Before(now.Add(ttl+time.Minute)),
					"expiry of a mark in %s: %v; want about %v from now", k, exp, ttl)
			}
			fields += len(h)
			left, err := client.PTTL(ctx, k).Result()
			require.NoError(t, err)
			assert.True(t, left > ttl-time.Minute && left <= ttl+ttl/8, "PTTL of bucket %s = %v; want %v to %v", k, left, ttl, ttl+ttl/8)
		case strings.HasPrefix(rest, "c:"):
			v, err := client.Get(ctx, k).Result()
			require.NoError(t, err)
			assert.Equal(t, "c:"+c.Token, v, "claim %s", k)
			claims++
		default:
			t.Errorf("unexpected key %q", k)
		}
	}
	assert.LessOrEqual(t, len(tags), shards, "shard tags %v", tags)
	assert.Equal(t, len(keys), fields, "fingerprints in buckets")
	assert.Equal(t, 1, claims, "claim keys")

	_, err = s.ListMarks(ctx, "", 10, func(dedupe.Key, time.Time) {})
	assert.ErrorIs(t, err, errors.ErrUnsupported, "ListMarks on the compact layout")
	marks, _, _, _, err := s.CountLive(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(len(keys)), marks, "CountLive marks")
}

// TestCompactPrune checks that a bucket of one shard, marked far beyond
// pruneAt with marks that expire at once, keeps its listpack encoding: each
// field added beyond pruneAt drops the expired ones. A mark of an hour keeps
// the bucket: one of only expired marks may expire as a whole, as soon as
// the minute to which its expiry is rounded up ends.
func TestCompactPrune(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	prefix := "dedupe-test-credis:" + randomID(t) + ":"
	s := newStore(t, client, deduperedis.Config{Prefix: prefix, Compact: true, Shards: 1})
	ctx := context.Background()
	t.Cleanup(func() { client.Del(ctx, keysUnder(t, client, prefix)...) })
	require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "telegram", MessageID: "kept"}, time.Hour))
	for i := range 300 {
		k := dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + i)}
		require.NoError(t, s.Mark(ctx, k, time.Millisecond))
	}
	bucket := prefix + "{0}m"
	n, err := client.HLen(ctx, bucket).Result()
	require.NoError(t, err)
	assert.LessOrEqual(t, n, int64(101), "fields of the bucket")
	enc, err := client.ObjectEncoding(ctx, bucket).Result()
	require.NoError(t, err)
	assert.Equal(t, "listpack", enc, "encoding of the bucket")
}

// TestCompactMarkExpiry checks the bucket's expiry that Mark sets without a
// script: at least its marks', rounded up by at most an eighth of the TTL, never
// shortened by a shorter mark, and set again on a bucket made anew; and that
// a Claim of a marked key leaves no claim behind.
func TestCompactMarkExpiry(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	prefix := "dedupe-test-credis:" + randomID(t) + ":"
	s := newStore(t, client, deduperedis.Config{Prefix: prefix, Compact: true, Shards: 1})
	ctx := context.Background()
	t.Cleanup(func() { client.Del(ctx, keysUnder(t, client, prefix)...) })
	bucket := prefix + "{0}m"
	key := func(i int) dedupe.Key {
		return dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + i)}
	}
	pttl := func() time.Duration {
		d, err := client.PTTL(ctx, bucket).Result()
		require.NoError(t, err)
		return d
	}

	require.NoError(t, s.Mark(ctx, key(0), time.Hour))
	assert.True(t, pttl() > time.Hour-time.Second && pttl() <= time.Hour+time.Hour/8, "PTTL of the bucket = %v; want 1h to 1h7m30s", pttl())
	require.NoError(t, s.Mark(ctx, key(1), time.Second))
	assert.Greater(t, pttl(), time.Hour-time.Second, "PTTL of the bucket after a shorter mark")
	require.NoError(t, s.Mark(ctx, key(2), 3*time.Hour))
	assert.Greater(t, pttl(), 3*time.Hour-time.Second, "PTTL of the bucket after a longer mark")

	st, err := s.Claim(ctx, dedupe.NewClaim(key(0)), 0)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Duplicate, st, "Claim of a marked key")
	claims, err := client.Keys(ctx, prefix+"*c:*").Result()
	require.NoError(t, err)
	assert.Empty(t, claims, "claim keys left by a Claim of a marked key")

	// A bucket deleted behind the store's back is made again by the next
	// Mark; a Mark past pruneAt fields gives it its expiry back.
	require.NoError(t, client.Del(ctx, bucket).Err())
	for i := range 120 {
		require.NoError(t, s.Mark(ctx, key(100+i), time.Hour))
	}
	assert.Greater(t, pttl(), time.Hour-time.Minute, "PTTL of the bucket made again")
}

// TestCompactClaimMarkRace races claimers of a key against the Mark of the
// one that took it, on both layouts: on the compact one, Mark's commands and
// Claim's are plain commands, not one script, so a Claim may run between
// Mark's HSET and its DEL. Each key must be claimed exactly once, and every
// claim after the Mark must be a duplicate.
func TestCompactClaimMarkRace(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			prefix := "dedupe-test-credis:" + randomID(t) + ":"
			const keys, racers = 1000, 8
			stores := make([]*deduperedis.Store, racers) // each on its own connections
			for i := range stores {
				stores[i] = newStore(t, newClient(t, redisAddr(t), nil), deduperedis.Config{Prefix: prefix, Compact: l.compact, Shards: 8})
			}
			ctx := context.Background()
			t.Cleanup(func() {
				client := newClient(t, redisAddr(t), nil)
				client.Del(ctx, keysUnder(t, client, prefix)...)
			})
			for i := range keys {
				k := dedupe.Key{Channel: "race", MessageID: strconv.Itoa(i)}
				var claimed atomic.Int32
				var wg sync.WaitGroup
				for _, s := range stores {
					wg.Go(func() {
						for {
							st, err := s.Claim(ctx, dedupe.NewClaim(k), time.Hour)
							if !assert.NoError(t, err) || st == dedupe.Duplicate {
								return
							}
							if st == dedupe.Claimed {
								claimed.Add(1)
								assert.NoError(t, s.Mark(ctx, k, time.Hour))
							}
						}
					})
				}
				wg.Wait()
				require.Equal(t, int32(1), claimed.Load(), "claims of %s", k)
			}
		})
	}
}
