package deduperedis_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
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
// with its latest mark; claims as strings; and ListMarks refused.
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
			assert.True(t, left > ttl-time.Minute && left <= ttl, "PTTL of bucket %s = %v; want about %v", k, left, ttl)
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
// field added beyond pruneAt drops the expired ones.
func TestCompactPrune(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	prefix := "dedupe-test-credis:" + randomID(t) + ":"
	s := newStore(t, client, deduperedis.Config{Prefix: prefix, Compact: true, Shards: 1})
	ctx := context.Background()
	t.Cleanup(func() { client.Del(ctx, keysUnder(t, client, prefix)...) })
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
