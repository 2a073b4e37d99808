package deduperedis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// A store opened on a prefix whose stores use another layout (Compact, or
// Shards) is refused at Ping and on every call, with an error naming both
// layouts, and changes nothing: the mark of the first store stays, and its
// key is not marked or claimed in the wrong place.
func TestLayoutMismatchRefused(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	plain, compact4k := deduperedis.Config{}, deduperedis.Config{Compact: true, Shards: 4096}
	for _, tc := range []struct {
		name          string
		first, second deduperedis.Config
		have, want    string
	}{
		{"plain then compact", plain, deduperedis.Config{Compact: true},
			"holds the plain layout", "configured for the compact layout with 16384 shards"},
		{"compact then plain", compact4k, plain,
			"holds the compact layout with 4096 shards", "configured for the plain layout"},
		{"other shards", compact4k, deduperedis.Config{Compact: true, Shards: 16},
			"holds the compact layout with 4096 shards", "configured for the compact layout with 16 shards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tc.first.Prefix = "dedupe-test-layout:" + randomID(t) + ":"
			tc.second.Prefix = tc.first.Prefix
			first := newStore(t, client, tc.first)
			k := dedupe.Key{Channel: "telegram", MessageID: "1"}
			require.NoError(t, first.Mark(ctx, k, time.Hour))

			second := newStore(t, client, tc.second)
			err := second.Ping(ctx)
			require.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, "Ping of the second store")
			assert.Contains(t, err.Error(), tc.have)
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), fmt.Sprintf("prefix %q", tc.first.Prefix))
			t.Log(err)

			_, err = second.Exists(ctx, k)
			assert.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, "Exists")
			_, err = second.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "telegram", MessageID: "2"}), 0)
			assert.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, "Claim")
			assert.ErrorIs(t, second.Mark(ctx, k, time.Second), deduperedis.ErrLayoutMismatch, "Mark")
			_, err = second.Forget(ctx, k)
			assert.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, "Forget")
			_, errs := second.ClaimEach(ctx, []dedupe.Claim{dedupe.NewClaim(k)}, 0)
			assert.ErrorIs(t, errs[0], deduperedis.ErrLayoutMismatch, "ClaimEach")
			_, _, _, _, err = second.CountLive(ctx)
			assert.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, "CountLive")

			// The first store still finds its mark, and only its keys are there.
			marked, err := first.Exists(ctx, k)
			require.NoError(t, err)
			assert.True(t, marked, "the first store's mark after the second store's calls")
			st, err := first.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "telegram", MessageID: "2"}), 0)
			require.NoError(t, err)
			assert.Equal(t, dedupe.Claimed, st, "a key the refused store tried to claim")
		})
	}
}

// A prefix written by a version that kept no record (its record deleted
// here) opens in its own layout, which is then recorded; a store of the
// other layout is refused on the keys it finds, though no record says so.
// The server is private: the check reads one page of SCAN, which on a busy
// shared server may hold none of a small prefix's keys.
func TestLayoutOldPrefix(t *testing.T) {
	redisAddr(t)
	client := newClient(t, startServer(t).Addr(), nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name          string
		cfg, other    deduperedis.Config
		record, found string
	}{
		{"plain", deduperedis.Config{}, deduperedis.Config{Compact: true},
			"format=1 layout=plain", "holds keys of the plain layout"},
		{"compact", deduperedis.Config{Compact: true, Shards: 64}, deduperedis.Config{},
			"format=1 layout=compact shards=64", "holds keys of the compact layout"},
		{"compact, fewer shards", deduperedis.Config{Compact: true, Shards: 64}, deduperedis.Config{Compact: true, Shards: 2},
			"format=1 layout=compact shards=64", "holds the bucket of shard"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "dedupe-test-layout:" + randomID(t) + ":"
			tc.cfg.Prefix, tc.other.Prefix = prefix, prefix
			t.Cleanup(func() { client.Del(ctx, keysUnder(t, client, prefix)...) })
			old := newStore(t, client, tc.cfg)
			keys := make([]dedupe.Key, 200)
			for i := range keys {
				keys[i] = dedupe.Key{Channel: "line", MessageID: fmt.Sprint(i)}
			}
			requireNoErrors(t, old.MarkEach(ctx, keys, nil, time.Hour), "MarkEach")
			require.NoError(t, client.Del(ctx, prefix+deduperedis.LayoutKey).Err())

			err := newStore(t, client, tc.other).Ping(ctx)
			require.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, "a store of another layout on the unrecorded prefix")
			assert.Contains(t, err.Error(), tc.found)
			assert.Contains(t, err.Error(), "no layout record")
			t.Log(err)
			n, err := client.Exists(ctx, prefix+deduperedis.LayoutKey).Result()
			require.NoError(t, err)
			assert.Zero(t, n, "the refused store recorded a layout")

			upgraded := newStore(t, client, tc.cfg)
			marked, err := upgraded.Exists(ctx, keys[7])
			require.NoError(t, err, "a store of the prefix's own layout on the unrecorded prefix")
			assert.True(t, marked, "Exists of a mark written before the record")
			rec, err := client.Get(ctx, prefix+deduperedis.LayoutKey).Result()
			require.NoError(t, err, "the record after the upgraded store's first call")
			assert.Equal(t, tc.record, rec)
			ttl, err := client.PTTL(ctx, prefix+deduperedis.LayoutKey).Result()
			require.NoError(t, err)
			assert.Equal(t, time.Duration(-1), ttl, "PTTL of the record: it must not expire")
		})
	}
}

// Stores of two layouts opening an empty prefix at once: the first
// record written wins, every store of its layout opens, every other is
// refused.
func TestLayoutRaceOnEmptyPrefix(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	ctx := context.Background()
	prefix := "dedupe-test-layout:" + randomID(t) + ":"
	cfgs := []deduperedis.Config{{Prefix: prefix}, {Prefix: prefix, Compact: true}}
	stores := make([]*deduperedis.Store, 16)
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i := range stores {
		stores[i] = newStore(t, client, cfgs[i%2])
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = stores[i].Ping(ctx)
		}()
	}
	wg.Wait()
	rec, err := client.Get(ctx, prefix+deduperedis.LayoutKey).Result()
	require.NoError(t, err)
	winner := 0
	if rec != "format=1 layout=plain" {
		winner = 1
	}
	for i, err := range errs {
		if i%2 == winner {
			assert.NoError(t, err, "store %d, of the recorded layout %q", i, rec)
		} else {
			assert.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, "store %d, of the other layout", i)
		}
	}
}

// A running store writes its record back when it was deleted (FLUSHALL, a
// failover that lost it), at its next recheck; and a store of another layout
// that recorded the prefix meanwhile makes the running one refuse its calls
// from its next recheck on, instead of writing where the other does not read.
func TestLayoutRecheck(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	ctx := context.Background()
	prefix := "dedupe-test-layout:" + randomID(t) + ":"
	s := newStore(t, client, deduperedis.Config{Prefix: prefix, Compact: true, Shards: 256})
	deduperedis.SetLayoutRecheck(s, time.Millisecond)
	k := dedupe.Key{Channel: "slack", MessageID: "1"}
	require.NoError(t, s.Mark(ctx, k, time.Hour))

	record := prefix + deduperedis.LayoutKey
	require.NoError(t, client.Del(ctx, record).Err()) // as a failover may lose it
	waitFor(t, "the record written back by the running store", 10*time.Second, func() bool {
		_, err := s.Exists(ctx, k)
		require.NoError(t, err)
		return client.Exists(ctx, record).Val() == 1
	})
	assert.Equal(t, "format=1 layout=compact shards=256", client.Get(ctx, record).Val())

	// FLUSHALL, on this prefix only, then a plain store opens first.
	require.NoError(t, client.Del(ctx, append(keysUnder(t, client, prefix), record)...).Err())
	plain := newStore(t, client, deduperedis.Config{Prefix: prefix})
	require.NoError(t, plain.Ping(ctx), "a plain store recording the prefix first")
	var err error
	waitFor(t, "the running compact store refused", 10*time.Second, func() bool {
		_, err = s.Exists(ctx, k)
		return errors.Is(err, deduperedis.ErrLayoutMismatch)
	})
	assert.Contains(t, err.Error(), "holds the plain layout")
	assert.ErrorIs(t, s.Mark(ctx, k, time.Hour), deduperedis.ErrLayoutMismatch, "Mark after the refusal")
}

// AdoptLayout takes the recorded layout, whatever the Config says: the
// store finds, forgets and counts the marks of a compact store it was not
// told about; on a prefix without a record it writes none.
func TestLayoutAdopt(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	ctx := context.Background()
	prefix := "dedupe-test-layout:" + randomID(t) + ":"
	gw := newStore(t, client, deduperedis.Config{Prefix: prefix, Compact: true, Shards: 512})
	k := dedupe.Key{Channel: "wecom", MessageID: "1"}
	require.NoError(t, gw.Mark(ctx, k, time.Hour))

	tool := newStore(t, client, deduperedis.Config{Prefix: prefix, AdoptLayout: true})
	require.NoError(t, tool.Ping(ctx))
	marks, _, _, _, err := tool.CountLive(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), marks, "CountLive of the adopting store")
	forgotten, err := tool.Forget(ctx, k)
	require.NoError(t, err)
	assert.True(t, forgotten, "Forget of the gateway's mark by the adopting store")
	marked, err := gw.Exists(ctx, k)
	require.NoError(t, err)
	assert.False(t, marked, "the gateway's mark after Forget")

	empty := "dedupe-test-layout:" + randomID(t) + ":"
	require.NoError(t, newStore(t, client, deduperedis.Config{Prefix: empty, AdoptLayout: true}).Ping(ctx))
	assert.Zero(t, client.Exists(ctx, empty+deduperedis.LayoutKey).Val(), "a record written by an adopting store")
	// A record this version cannot read is refused, adopting or not.
	require.NoError(t, client.Set(ctx, empty+deduperedis.LayoutKey, "format=2 layout=sparse", 0).Err())
	err = newStore(t, client, deduperedis.Config{Prefix: empty, AdoptLayout: true}).Ping(ctx)
	require.ErrorIs(t, err, deduperedis.ErrLayoutMismatch)
	assert.Contains(t, err.Error(), "cannot read")
}

// The URL's layout= and shards= name the layout, and are refused when
// they contradict the prefix's record; bad values are refused before any
// connection.
func TestOpenURLLayout(t *testing.T) {
	addr := redisAddr(t)
	client := newClient(t, addr, nil)
	ctx := context.Background()
	prefix := "dedupe-test-layout:" + randomID(t) + ":"
	gw := newStore(t, client, deduperedis.Config{Prefix: prefix, Compact: true, Shards: 4096})
	k := dedupe.Key{Channel: "line", MessageID: "1"}
	require.NoError(t, gw.Mark(ctx, k, time.Hour))
	base := "redis://" + addr + "/0?prefix=" + prefix

	for _, tc := range []struct{ query, refusal string }{
		{"&layout=compact&shards=4096", ""},
		{"", ""}, // no layout in the URL: the record's, adopted
		{"&layout=plain", "configured for the plain layout"},
		{"&layout=compact", "configured for the compact layout with 16384 shards"},
		{"&layout=compact&shards=16", "configured for the compact layout with 16 shards"},
	} {
		s, err := deduperedis.OpenURL(base+tc.query, deduperedis.Config{AdoptLayout: true})
		require.NoError(t, err, tc.query)
		err = s.Ping(ctx)
		if tc.refusal == "" {
			require.NoError(t, err, tc.query)
			marked, err := s.Exists(ctx, k)
			require.NoError(t, err)
			assert.True(t, marked, "%s: Exists of the gateway's mark", tc.query)
		} else {
			require.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, tc.query)
			assert.Contains(t, err.Error(), tc.refusal, tc.query)
		}
		require.NoError(t, s.Close())
	}
	for _, q := range []string{"&layout=sparse", "&shards=16", "&layout=plain&shards=16", "&layout=compact&shards=0", "&layout=compact&shards=x"} {
		_, err := deduperedis.OpenURL(base+q, deduperedis.Config{})
		assert.Error(t, err, q)
		_, err = deduperedis.OpenClusterURL(base+q, deduperedis.Config{})
		assert.Error(t, err, "cluster URL %s", q)
	}
}

// On Redis Cluster the record is one key like any other, on the master of
// its slot: a store of another layout is refused there too.
func TestLayoutCluster(t *testing.T) {
	redisAddr(t)
	nodes := startCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	for _, prefix := range []string{"dedupe:", "dedupe:{gw}:"} {
		gw := newStore(t, client, deduperedis.Config{Prefix: prefix, Compact: true, Shards: 64})
		keys := make([]dedupe.Key, 100)
		for i := range keys {
			keys[i] = dedupe.Key{Channel: "line", MessageID: fmt.Sprint(i)}
		}
		requireNoErrors(t, gw.MarkEach(ctx, keys, nil, time.Hour), "MarkEach")
		assert.Equal(t, "format=1 layout=compact shards=64", client.Get(ctx, prefix+deduperedis.LayoutKey).Val(), prefix)

		err := newStore(t, client, deduperedis.Config{Prefix: prefix}).Ping(ctx)
		require.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, prefix)
		tool := newStore(t, client, deduperedis.Config{Prefix: prefix, AdoptLayout: true})
		marks, _, _, _, err := tool.CountLive(ctx)
		require.NoError(t, err, prefix)
		assert.Equal(t, int64(len(keys)), marks, prefix)

		// Without the record, the sample of every master finds the buckets.
		require.NoError(t, client.Del(ctx, prefix+deduperedis.LayoutKey).Err())
		err = newStore(t, client, deduperedis.Config{Prefix: prefix}).Ping(ctx)
		require.ErrorIs(t, err, deduperedis.ErrLayoutMismatch, prefix)
		assert.Contains(t, err.Error(), "no layout record")
	}
}
