package dedupe_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
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
			return dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: o.TTL, Lease: o.Lease, MaxSize: o.MaxSize, Now: o.Now})
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

// A claim in flight survives a flood of other keys three times the store's
// size: marks are evicted, never claims.
func TestMemoryPinsClaims(t *testing.T) {
	ctx := context.Background()
	const size = 10000
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: size})
	victim := dedupe.Key{Channel: "telegram", MessageID: "victim"}
	c, status, err := claimNew(ctx, st, victim, time.Hour)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, status)
	d := dedupe.New(st)
	for i := 0; i < 3*size; i++ {
		k := dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(i)}
		require.NoError(t, d.Do(ctx, k, func(context.Context) error { return nil }))
	}
	assert.LessOrEqual(t, st.Len(), size+1, "marks stay within MaxSize")
	_, status, err = claimNew(ctx, st, victim, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, dedupe.InFlight, status, "the claim survived the flood")
	require.ErrorIs(t, d.Do(ctx, victim, func(context.Context) error { return nil }), dedupe.ErrInFlight)
	require.NoError(t, st.Extend(ctx, c, time.Hour), "its owner still holds it")
	require.NoError(t, st.Mark(ctx, victim, time.Hour))
	ok, err := st.Exists(ctx, victim)
	require.NoError(t, err)
	assert.True(t, ok)

	other := dedupe.Key{Channel: "telegram", MessageID: "other"}
	c, _, err = claimNew(ctx, st, other, time.Hour)
	require.NoError(t, err)
	for i := 0; i < 3*size; i++ {
		require.NoError(t, st.Mark(ctx, dedupe.Key{Channel: "qq", MessageID: strconv.Itoa(i)}, time.Hour))
	}
	require.NoError(t, st.Release(ctx, c), "its owner can release it after the flood")
}

// Claims beyond MaxClaims are refused with ErrStoreFull, not made room for;
// expired claims are dropped to make room.
func TestMemoryStoreFull(t *testing.T) {
	ctx := context.Background()
	clock := dedupetest.NewClock(time.Unix(1e9, 0))
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1000, MaxClaims: 10, Now: clock.Now})
	k := func(i int) dedupe.Key { return dedupe.Key{Channel: "x", MessageID: strconv.Itoa(i)} }
	var held []dedupe.Claim
	for i := 0; i < 10; i++ {
		c, status, err := claimNew(ctx, st, k(i), time.Minute)
		require.NoError(t, err)
		require.Equal(t, dedupe.Claimed, status)
		held = append(held, c)
	}
	_, _, err := claimNew(ctx, st, k(10), time.Minute)
	require.ErrorIs(t, err, dedupe.ErrStoreFull)
	assert.Contains(t, err.Error(), "dedupe: memory: claim x:10")
	// Marks are not claims: they still go in, and Do fails closed.
	require.NoError(t, st.Mark(ctx, k(11), time.Hour))
	ran := false
	err = dedupe.New(st).Do(ctx, k(12), func(context.Context) error { ran = true; return nil })
	require.ErrorIs(t, err, dedupe.ErrStoreFull)
	assert.False(t, ran)
	// A marked or released claim frees its place.
	require.NoError(t, st.Mark(ctx, held[0].Key, time.Hour))
	require.NoError(t, st.Release(ctx, held[1]))
	for i := 20; i < 22; i++ {
		_, status, err := claimNew(ctx, st, k(i), time.Minute)
		require.NoError(t, err)
		require.Equal(t, dedupe.Claimed, status)
	}
	_, _, err = claimNew(ctx, st, k(22), time.Minute)
	require.ErrorIs(t, err, dedupe.ErrStoreFull)
	// So does a lease that ran out.
	clock.Advance(time.Minute)
	_, status, err := claimNew(ctx, st, k(22), time.Minute)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Claimed, status)
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
		ok, _ := st.Exists(ctx, key1)
		require.True(t, ok, "key missing")
	})
	assert.Zero(t, allocs, "Exists on a present key allocates")

	keys := newKeys(50000)
	claims := make([]dedupe.Claim, len(keys))
	for i, k := range keys {
		claims[i] = dedupe.NewClaim(k)
	}
	full := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1000})
	i := 0
	allocs = testing.AllocsPerRun(20000, func() {
		c := claims[i%len(keys)]
		k := c.Key
		i++
		status, err := full.Claim(ctx, c, time.Minute)
		// Checked before formatting: boxing k on every run would count as an allocation.
		if err != nil || status != dedupe.Claimed {
			require.Failf(t, "claim of a new key", "Claim(%s) = %v, %v", k, status, err)
		}
		require.NoError(t, full.Mark(ctx, k, time.Hour))
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
				c, cSt, err := claimNew(ctx, st, k, time.Minute)
				if !assert.NoError(t, err) {
					return
				}
				if cSt == dedupe.Claimed {
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

// claimNew claims key on st with a new token, for tests that call a store
// directly: the claim, its status and the error.
func claimNew(ctx context.Context, st dedupe.Store, key dedupe.Key, lease time.Duration) (dedupe.Claim, dedupe.Status, error) {
	c := dedupe.NewClaim(key)
	status, err := st.Claim(ctx, c, lease)
	return c, status, err
}

// MaxClaims is exact under concurrent claims on every shard: exactly
// MaxClaims of them are taken, the others refused.
func TestMemoryMaxClaimsExact(t *testing.T) {
	ctx := context.Background()
	const maxClaims = 1000
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 100000, MaxClaims: maxClaims})
	for round := range 3 {
		var claimed, full atomic.Int32
		var mu sync.Mutex
		var held []dedupe.Claim
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 300 {
					c := dedupe.NewClaim(dedupe.Key{Channel: "r" + strconv.Itoa(round), MessageID: strconv.Itoa(g*1000 + i)})
					status, err := st.Claim(ctx, c, time.Hour)
					switch {
					case errors.Is(err, dedupe.ErrStoreFull):
						full.Add(1)
					case err != nil:
						assert.NoError(t, err)
					case status == dedupe.Claimed:
						claimed.Add(1)
						mu.Lock()
						held = append(held, c)
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		require.Equal(t, int32(maxClaims), claimed.Load(), "round %d: exactly MaxClaims claims", round)
		require.Equal(t, int32(8*300-maxClaims), full.Load())
		for i, c := range held { // half released, half marked: both free their slot
			if i%2 == 0 {
				require.NoError(t, st.Release(ctx, c))
			} else {
				require.NoError(t, st.Mark(ctx, c.Key, time.Hour))
			}
		}
	}
}

// MaxClaims is exact while claims come and go on every shard at once: each
// goroutine holds at most its share of MaxClaims, so every claim it asks for
// has room, and none is refused.
func TestMemoryMaxClaimsChurn(t *testing.T) {
	ctx := context.Background()
	const (
		goroutines = 8
		share      = 16 // claims a goroutine holds at most
		maxClaims  = goroutines * share
		claims     = 8000 // claims a goroutine asks for
	)
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 100000, MaxClaims: maxClaims})
	var refused atomic.Int32
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			held := make([]dedupe.Claim, 0, share)
			for i := range claims {
				if len(held) == share { // make room first: release or mark the oldest
					c := held[0]
					held = append(held[:0], held[1:]...)
					var err error
					if i%2 == 0 {
						err = st.Release(ctx, c)
					} else {
						err = st.Mark(ctx, c.Key, time.Hour)
					}
					if !assert.NoError(t, err) {
						return
					}
				}
				c := dedupe.NewClaim(dedupe.Key{Channel: "churn", MessageID: strconv.Itoa(g*claims + i)})
				status, err := st.Claim(ctx, c, time.Hour)
				if errors.Is(err, dedupe.ErrStoreFull) {
					refused.Add(1)
					continue
				}
				if !assert.NoError(t, err) || !assert.Equal(t, dedupe.Claimed, status) {
					return
				}
				held = append(held, c)
			}
		})
	}
	wg.Wait()
	assert.Zero(t, refused.Load(), "claims refused with room left, of %d", goroutines*claims)
}
