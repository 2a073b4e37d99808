package dedupe_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryConformance(t *testing.T) {
	dedupetest.Run(t, dedupetest.Config{
		New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
			return dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: o.TTL, Lease: o.Lease, Now: o.Now})
		},
	})
}

func TestMemoryLRUBound(t *testing.T) {
	ctx := context.Background()
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1000})
	k := func(i int) dedupe.Key { return dedupe.Key{Channel: "qq", MessageID: strconv.Itoa(i)} }
	for i := 0; i < 5000; i++ {
		require.NoError(t, st.Mark(ctx, k(i), time.Hour))
		require.LessOrEqual(t, st.Len(), 1000)
	}
	assert.Equal(t, 1000, st.Len(), "full, not more")
	// The newest keys survive: each shard keeps its most recent entries, and the
	// last 100 keys are far fewer than any shard holds.
	for i := 4900; i < 5000; i++ {
		ok, err := st.Exists(ctx, k(i))
		require.NoError(t, err)
		assert.True(t, ok, "recent key %d evicted", i)
	}
	for i := 0; i < 100; i++ {
		ok, _ := st.Exists(ctx, k(i))
		assert.False(t, ok, "old key %d kept", i)
	}
}

func TestMemoryLRUKeepsRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 100}) // one shard below 256 entries
	hot := dedupe.Key{Channel: "qq", MessageID: "hot"}
	require.NoError(t, st.Mark(ctx, hot, time.Hour))
	for i := 0; i < 1000; i++ {
		require.NoError(t, st.Mark(ctx, dedupe.Key{Channel: "qq", MessageID: strconv.Itoa(i)}, time.Hour))
		ok, err := st.Exists(ctx, hot) // a use: keeps it at the front
		require.NoError(t, err)
		require.True(t, ok, "hot key evicted after %d inserts", i)
	}
}

func TestMemoryEvictsClaims(t *testing.T) {
	ctx := context.Background()
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1})
	a, b := dedupe.Key{Channel: "x", MessageID: "a"}, dedupe.Key{Channel: "x", MessageID: "b"}
	ca, err := st.Claim(ctx, a, time.Hour)
	require.NoError(t, err)
	_, err = st.Claim(ctx, b, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Len(), "claims count towards MaxSize")
	require.ErrorIs(t, st.Release(ctx, ca), dedupe.ErrNotOwner, "the evicted claim is gone")
	c, err := st.Claim(ctx, a, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Claimed, c.Status)
}

func TestMemoryExpiredDropped(t *testing.T) {
	ctx := context.Background()
	clock := dedupetest.NewClock(time.Unix(0, 0))
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: clock.Now})
	require.NoError(t, st.Mark(ctx, key1, time.Minute))
	clock.Advance(time.Minute)
	ok, err := st.Exists(ctx, key1)
	require.NoError(t, err)
	assert.False(t, ok, "expired at exactly its TTL")
	assert.Equal(t, 0, st.Len(), "the expired entry was dropped when touched")
}

func TestMemoryHitAllocs(t *testing.T) {
	ctx := context.Background()
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	require.NoError(t, st.Mark(ctx, key1, time.Hour))
	allocs := testing.AllocsPerRun(1000, func() {
		if ok, _ := st.Exists(ctx, key1); !ok {
			t.Fatal("key missing")
		}
	})
	assert.Zero(t, allocs, "Exists on a present key allocates")

	keys := newKeys(50000)
	full := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1000})
	i := 0
	allocs = testing.AllocsPerRun(20000, func() {
		k := keys[i%len(keys)]
		i++
		c, err := full.Claim(ctx, k, time.Minute)
		if err != nil || c.Status != dedupe.Claimed {
			t.Fatalf("Claim(%s) = %v, %v", k, c.Status, err)
		}
		if err := full.Mark(ctx, k, time.Hour); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, allocs, 1.0, "Claim then Mark of a new key in a full store")
}

func TestMemoryConcurrentMixed(t *testing.T) {
	ctx := context.Background()
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 512})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				k := dedupe.Key{Channel: "c", MessageID: strconv.Itoa((i * (g + 1)) % 700)}
				c, err := st.Claim(ctx, k, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if c.Status == dedupe.Claimed {
					if i%3 == 0 {
						_ = st.Release(ctx, c)
					} else {
						_ = st.Extend(ctx, c, time.Minute)
						_ = st.Mark(ctx, k, time.Hour)
					}
				}
				_, _ = st.Exists(ctx, k)
			}
		}()
	}
	wg.Wait()
	assert.LessOrEqual(t, st.Len(), 512)
}

func newKeys(n int) []dedupe.Key {
	keys := make([]dedupe.Key, n)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + i)}
	}
	return keys
}
