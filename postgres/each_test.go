package postgres

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// forLayouts runs f as a subtest on a new table of each layout.
func forLayouts(t *testing.T, f func(t *testing.T, pool *pgxpool.Pool, cfg Config)) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			cfg := l.cfg
			cfg.Table = testTable(t)
			f(t, newPool(t, "", 0), cfg)
		})
	}
}

// eachKeys returns n new keys of a channel of their own.
func eachKeys(t *testing.T, n int) []dedupe.Key {
	id := randomHex(t, 6)
	ks := make([]dedupe.Key, n)
	for i := range ks {
		ks[i] = dedupe.Key{Channel: "each", MessageID: fmt.Sprintf("%s-%d", id, i)}
	}
	return ks
}

// newClaims returns a claim with a new token on each of keys.
func newClaims(keys []dedupe.Key) []dedupe.Claim {
	cs := make([]dedupe.Claim, len(keys))
	for i, k := range keys {
		cs[i] = dedupe.NewClaim(k)
	}
	return cs
}

// TestEachOutcomes checks each batch call on keys in every state a one-key
// call meets, with a key repeated in the batch (which the store sends in
// separate round trips, in order): a new key, a marked one, one claimed by
// another token, one whose token was released (fenced) and invalid items.
func TestEachOutcomes(t *testing.T) {
	forLayouts(t, func(t *testing.T, pool *pgxpool.Pool, cfg Config) {
		ctx := context.Background()
		s := newTestStore(t, pool, cfg)
		ks := eachKeys(t, 4)
		fresh, marked, held, fenced := ks[0], ks[1], ks[2], ks[3]
		require.NoError(t, s.Mark(ctx, marked, time.Hour))
		_, st, err := claimNew(ctx, s, held, time.Hour)
		require.NoError(t, err)
		require.Equal(t, dedupe.Claimed, st)
		released, st, err := claimNew(ctx, s, fenced, time.Hour)
		require.NoError(t, err)
		require.Equal(t, dedupe.Claimed, st)
		require.NoError(t, s.Release(ctx, released))

		mine := dedupe.NewClaim(fresh)
		other := dedupe.NewClaim(fresh)
		taker := dedupe.NewClaim(fenced)
		claims := []dedupe.Claim{
			mine, dedupe.NewClaim(marked), dedupe.NewClaim(held), released,
			{Key: dedupe.Key{Channel: "each"}, Token: "t"}, {Key: fresh, Token: "has space"},
			mine, other, taker,
		}
		sts, errs := s.ClaimEach(ctx, claims, time.Hour)
		for i, want := range []dedupe.Status{dedupe.Claimed, dedupe.Duplicate, dedupe.InFlight, dedupe.InFlight, 0, 0,
			dedupe.Claimed, dedupe.InFlight, dedupe.Claimed} {
			if want == 0 {
				assert.ErrorIs(t, errs[i], dedupe.ErrInvalidKey, "item %d", i)
				continue
			}
			if assert.NoError(t, errs[i], "item %d", i) {
				assert.Equal(t, want, sts[i], "item %d (%s)", i, claims[i].Key)
			}
		}

		errs = s.ExtendEach(ctx, []dedupe.Claim{mine, other, released, {Key: fresh, Token: "has space"}, taker}, 2*time.Hour)
		assert.NoError(t, errs[0])
		assert.ErrorIs(t, errs[1], dedupe.ErrNotOwner)
		assert.ErrorIs(t, errs[2], dedupe.ErrNotOwner)
		assert.ErrorIs(t, errs[3], dedupe.ErrNotOwner)
		assert.NoError(t, errs[4])
		assert.Greater(t, remaining(t, pool, s, fresh), time.Hour, "the extended lease")

		// A release, then the same release again in the batch: not held any more.
		errs = s.ReleaseEach(ctx, []dedupe.Claim{taker, taker, other})
		assert.NoError(t, errs[0])
		assert.ErrorIs(t, errs[1], dedupe.ErrNotOwner)
		assert.ErrorIs(t, errs[2], dedupe.ErrNotOwner)
		sts, errs = s.ClaimEach(ctx, []dedupe.Claim{taker, dedupe.NewClaim(fenced)}, time.Hour)
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		assert.Equal(t, []dedupe.Status{dedupe.InFlight, dedupe.Claimed}, sts, "a released token is fenced, another takes the key")

		// Marks with and without a result; a mark of a key twice keeps the last.
		errs = s.MarkEach(ctx, []dedupe.Key{fresh, fenced, fresh, {}}, [][]byte{[]byte("first"), nil, []byte("reply"), nil}, time.Hour)
		require.NoError(t, errs[0])
		require.NoError(t, errs[1])
		require.NoError(t, errs[2])
		assert.ErrorIs(t, errs[3], dedupe.ErrInvalidKey)
		res, ok, err := s.Result(ctx, fresh)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, "reply", string(res))
		res, ok, err = s.Result(ctx, fenced)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Nil(t, res)
		sts, errs = s.ClaimEach(ctx, newClaims([]dedupe.Key{fresh, fenced}), time.Hour)
		assert.Equal(t, []error{nil, nil}, errs)
		assert.Equal(t, []dedupe.Status{dedupe.Duplicate, dedupe.Duplicate}, sts)

		big := make([]byte, dedupe.MaxResultSize+1)
		errs = s.MarkEach(ctx, []dedupe.Key{held, marked}, [][]byte{big, nil}, 0)
		assert.ErrorIs(t, errs[0], dedupe.ErrTooLarge)
		assert.NoError(t, errs[1])
		for _, err := range s.MarkEach(ctx, []dedupe.Key{held, marked}, [][]byte{nil}, 0) {
			assert.ErrorIs(t, err, dedupe.ErrInvalidKey, "results not as long as keys")
		}
	})
}

// TestEachOverLimit sends batches of 2,500 items, over the 1,000 a
// statement carries: every item is done, in three round trips.
func TestEachOverLimit(t *testing.T) {
	forLayouts(t, func(t *testing.T, pool *pgxpool.Pool, cfg Config) {
		ctx := context.Background()
		s := newTestStore(t, pool, cfg)
		ks := eachKeys(t, 2*maxEach+500)
		claims := newClaims(ks)
		sts, errs := s.ClaimEach(ctx, claims, time.Hour)
		for i := range ks {
			require.NoError(t, errs[i])
			require.Equal(t, dedupe.Claimed, sts[i])
		}
		for _, err := range s.ExtendEach(ctx, claims, 2*time.Hour) {
			require.NoError(t, err)
		}
		for _, err := range s.MarkEach(ctx, ks, nil, time.Hour) {
			require.NoError(t, err)
		}
		sts, errs = s.ClaimEach(ctx, newClaims(ks), time.Hour)
		for i := range ks {
			require.NoError(t, errs[i])
			require.Equal(t, dedupe.Duplicate, sts[i])
		}
		for _, err := range s.ReleaseEach(ctx, claims) {
			require.ErrorIs(t, err, dedupe.ErrNotOwner, "a marked key is not held")
		}
	})
}

// TestEachRefusedAlone checks that a batch whose statement the server
// refuses is sent again key by key, so that only the key at fault fails:
// here a constraint that a deployment added to its table.
func TestEachRefusedAlone(t *testing.T) {
	forLayouts(t, func(t *testing.T, pool *pgxpool.Pool, cfg Config) {
		ctx := context.Background()
		s := newTestStore(t, pool, cfg)
		_, err := pool.Exec(ctx, `ALTER TABLE `+s.table+` ADD CONSTRAINT no_bad CHECK (key NOT LIKE '%-bad')`)
		require.NoError(t, err)
		ks := eachKeys(t, 5)
		ks[2].MessageID += "-bad"
		sts, errs := s.ClaimEach(ctx, newClaims(ks), time.Hour)
		for i := range ks {
			if i == 2 {
				assert.ErrorContains(t, errs[i], "no_bad")
				continue
			}
			assert.NoError(t, errs[i])
			assert.Equal(t, dedupe.Claimed, sts[i])
		}
		errs = s.MarkEach(ctx, ks, nil, time.Hour)
		assert.Error(t, errs[2])
		assert.Equal(t, []error{nil, nil, nil, nil}, append(errs[:2:2], errs[3:]...))
	})
}

// TestEachReadOnly checks that a read-only store refuses every item of a
// batch call that writes.
func TestEachReadOnly(t *testing.T) {
	forLayouts(t, func(t *testing.T, pool *pgxpool.Pool, cfg Config) {
		ctx := context.Background()
		newTestStore(t, pool, cfg)
		cfg.ReadOnly = true
		s := newTestStore(t, pool, cfg)
		ks := eachKeys(t, 2)
		claims := newClaims(ks)
		_, errs := s.ClaimEach(ctx, claims, 0)
		errs = append(errs, s.ExtendEach(ctx, claims, 0)...)
		errs = append(errs, s.ReleaseEach(ctx, claims)...)
		errs = append(errs, s.MarkEach(ctx, ks, nil, 0)...)
		for _, err := range errs {
			assert.ErrorIs(t, err, dedupe.ErrReadOnly)
		}
	})
}

// TestEachBesideOneKeyClaims races batches of claims with one-key Claims
// of the same keys from other stores, on connections of their own: each
// key is taken by exactly one claim.
func TestEachBesideOneKeyClaims(t *testing.T) {
	forLayouts(t, func(t *testing.T, pool *pgxpool.Pool, cfg Config) {
		const keys, batchers, singles = 300, 4, 8
		ctx := context.Background()
		ks := eachKeys(t, keys)
		var won [keys]atomic.Int32
		var wg sync.WaitGroup
		for range batchers {
			s := newTestStore(t, newPool(t, "", 4), cfg)
			wg.Go(func() {
				order := rand.Perm(keys)
				for lo := 0; lo < keys; lo += 50 {
					idx := order[lo : lo+50]
					batch := make([]dedupe.Key, len(idx))
					for j, i := range idx {
						batch[j] = ks[i]
					}
					sts, errs := s.ClaimEach(ctx, newClaims(batch), time.Hour)
					for j, i := range idx {
						if assert.NoError(t, errs[j]) && sts[j] == dedupe.Claimed {
							won[i].Add(1)
						}
					}
				}
			})
		}
		for range singles {
			s := newTestStore(t, newPool(t, "", 4), cfg)
			wg.Go(func() {
				for _, i := range rand.Perm(keys) {
					_, st, err := claimNew(ctx, s, ks[i], time.Hour)
					if assert.NoError(t, err) && st == dedupe.Claimed {
						won[i].Add(1)
					}
				}
			})
		}
		wg.Wait()
		for i := range ks {
			assert.Equal(t, int32(1), won[i].Load(), "claims that took %s", ks[i])
		}
	})
}

// TestEachCutMidway cuts the connection of a batch of claims on its way to
// the server, which runs it later: every item fails; a retry with the same
// claims takes every key (the late statement then renews them), and after
// a release of the claims instead, the late statement is fenced and takes
// nothing, so that no key is stranded.
func TestEachCutMidway(t *testing.T) {
	for _, retry := range []bool{true, false} {
		name := map[bool]string{true: "retry", false: "release"}[retry]
		t.Run(name, func(t *testing.T) {
			forLayouts(t, func(t *testing.T, _ *pgxpool.Pool, cfg Config) {
				cutMidway(t, cfg, retry)
			})
		})
	}
}

// cutMidway is TestEachCutMidway on a table of layout cfg: it retries the
// claims if retry is set, and otherwise releases them.
func cutMidway(t *testing.T, cfg Config, retry bool) {
	ctx := context.Background()
	app := "dedupe_each_" + randomHex(t, 4)
	pool, p := lateProxyPool(t, app)
	s := newTestStore(t, pool, cfg)
	other := newTestStore(t, newPool(t, "", 0), cfg)

	// Prepare the statements on the pool's one connection, so that the
	// batch below is one request.
	warm := newClaims(eachKeys(t, 2))
	_, errs := s.ClaimEach(ctx, warm, time.Minute)
	require.Equal(t, []error{nil, nil}, errs)
	require.Equal(t, []error{nil, nil}, s.ReleaseEach(ctx, warm))

	ks := eachKeys(t, 40)
	claims := newClaims(ks)
	p.SetLatency(lateLatency)
	before := p.Stats().Requested
	done := make(chan []error, 1)
	go func() {
		_, errs := s.ClaimEach(ctx, claims, time.Hour)
		done <- errs
	}()
	require.Eventually(t, func() bool { return p.Stats().Requested > before }, 30*time.Second, time.Millisecond,
		"the batch never reached the proxy")
	sent := time.Now()
	p.SetLatency(0)
	require.Equal(t, 1, p.CutClients(), "the pool has one connection")
	for i, err := range <-done {
		require.Error(t, err, "item %d of the cut batch", i)
	}

	if retry {
		sts, errs := s.ClaimEach(ctx, claims, time.Hour)
		for i := range ks {
			require.NoError(t, errs[i])
			require.Equal(t, dedupe.Claimed, sts[i], "the retry of %s with the same claim", ks[i])
		}
	} else {
		for _, err := range s.ReleaseEach(ctx, claims) {
			if err != nil {
				require.ErrorIs(t, err, dedupe.ErrNotOwner)
			}
		}
	}
	require.Less(t, time.Since(sent), lateLatency, "the retry or release took longer than the batch's delay")

	// The cut batch reaches the server now; its backend runs it, then
	// finds its connection closed and ends.
	admin := adminConn(t)
	require.Eventually(t, func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n)
		return err == nil && n <= 1
	}, lateLatency+time.Minute, 10*time.Millisecond, "the backend of the cut connection never ended")

	if retry {
		for _, err := range s.MarkEach(ctx, ks, nil, time.Hour) {
			require.NoError(t, err)
		}
		sts, errs := other.ClaimEach(ctx, newClaims(ks), time.Hour)
		for i := range ks {
			require.NoError(t, errs[i])
			require.Equal(t, dedupe.Duplicate, sts[i], "%s was marked", ks[i])
		}
		return
	}
	sts, errs := other.ClaimEach(ctx, newClaims(ks), time.Hour)
	for i := range ks {
		require.NoError(t, errs[i])
		require.Equal(t, dedupe.Claimed, sts[i], "the late batch took %s after its release: stranded for the lease", ks[i])
	}
}

// TestSegments checks how a batch is cut into round trips.
func TestSegments(t *testing.T) {
	keys := []string{"a", "b", "a", "c", "b", "b"}
	assert.Equal(t, [][]int{{0, 1}, {2, 3, 4}, {5}}, segments(keys, []int{0, 1, 2, 3, 4, 5}))
	assert.Equal(t, [][]int{{1, 2, 3}}, segments(keys, []int{1, 2, 3}))
	assert.Empty(t, segments(keys, nil))
	long := make([]string, 2*maxEach+1)
	idx := make([]int, len(long))
	for i := range long {
		long[i], idx[i] = fmt.Sprint(i), i
	}
	runs := segments(long, idx)
	require.Len(t, runs, 3)
	assert.Equal(t, []int{maxEach, maxEach, 1}, []int{len(runs[0]), len(runs[1]), len(runs[2])})
}
