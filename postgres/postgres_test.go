package postgres

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// Unit of the conformance suite's real-time run. The suite's leases are ten
// units, and ClaimExclusive's 1024 racing claims must finish within one: with
// the race detector on a loaded two-core machine they took up to 1.6 s, so
// 100 ms (a 1 s lease) let leases run out mid-race and keys be claimed again,
// legitimately. 300 ms gives a 3 s lease and margins of at least 900 ms; the
// suite then takes about 35 s.
const conformanceUnit = 300 * time.Millisecond

// TestConformance runs the conformance suite on the plain layout: its
// stores share one table, but those that ask to be isolated get a table of
// their own.
func TestConformance(t *testing.T) {
	pool := newPool(t, "", 0)
	table := testTable(t)
	dedupetest.Run(t, dedupetest.Config{
		RealTime: true,
		Unit:     conformanceUnit,
		New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
			table := table
			if o.Isolated {
				table = testTable(t)
			}
			s, err := New(context.Background(), pool, Config{Table: table, TTL: o.TTL, Lease: o.Lease})
			require.NoError(t, err, "New")
			return s
		},
	})
}

// remaining returns how long the row of k has left on the server's clock.
func remaining(t *testing.T, pool *pgxpool.Pool, s *Store, k dedupe.Key) time.Duration {
	t.Helper()
	var d time.Duration
	err := pool.QueryRow(context.Background(),
		`SELECT (extract(epoch FROM expires_at - now()) * 1e9)::bigint FROM `+s.table+` WHERE key = $1`,
		k.String()).Scan(&d)
	require.NoError(t, err, "expiry of %s", k)
	return d
}

// TestDefaults checks the built-in 24 h TTL and 5 min lease, which the
// real-time conformance run cannot wait out, by reading the stored expiry.
func TestDefaults(t *testing.T) {
	pool := newPool(t, "", 0)
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		cfg        Config
		ttl, lease time.Duration
	}{
		{"builtin", Config{}, dedupe.DefaultTTL, dedupe.DefaultLease},
		{"configured", Config{TTL: 72 * time.Hour, Lease: 30 * time.Second}, 72 * time.Hour, 30 * time.Second},
		{"negative", Config{TTL: -time.Hour, Lease: -time.Minute}, dedupe.DefaultTTL, dedupe.DefaultLease},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestStore(t, pool, tc.cfg)
			near := func(what string, got, want time.Duration) {
				t.Helper()
				assert.LessOrEqual(t, got, want, "%s: time left, want just under %v", what, want)
				assert.GreaterOrEqual(t, got, want-time.Minute, "%s: time left, want just under %v", what, want)
			}
			for i, ttl := range []time.Duration{0, -time.Second} {
				k := dedupe.Key{Channel: "defaults", MessageID: "mark" + string(rune('0'+i))}
				require.NoError(t, s.Mark(ctx, k, ttl))
				near("Mark(ttl "+ttl.String()+")", remaining(t, pool, s, k), tc.ttl)
			}
			k := dedupe.Key{Channel: "defaults", MessageID: "claim"}
			c, cSt, err := claimNew(ctx, s, k, 0)
			require.NoError(t, err, "Claim")
			require.Equal(t, dedupe.Claimed, cSt, "Claim = %v", c)
			near("Claim(lease 0)", remaining(t, pool, s, k), tc.lease)
			require.NoError(t, s.Extend(ctx, c, time.Hour))
			near("Extend(1h)", remaining(t, pool, s, k), time.Hour)
			require.NoError(t, s.Extend(ctx, c, 0))
			near("Extend(0)", remaining(t, pool, s, k), tc.lease)
			assert.Equal(t, "postgres", s.Backend(), "Backend()")
		})
	}
}

// TestTokens checks that Release and Extend refuse a token no claim can have,
// without a round trip.
func TestTokens(t *testing.T) {
	// A store with no pool: a refused claim must not reach it.
	s := &Store{}
	k := dedupe.Key{Channel: "t", MessageID: "1"}
	for _, c := range []dedupe.Claim{
		{Key: k, Token: "with space"},
		{Key: k, Token: strings.Repeat("0", 65)},
		{Key: k},
	} {
		assert.ErrorIs(t, s.Release(context.Background(), c), dedupe.ErrNotOwner, "Release(%+v)", c)
		assert.ErrorIs(t, s.Extend(context.Background(), c, time.Minute), dedupe.ErrNotOwner, "Extend(%+v)", c)
	}
}

func TestMicros(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Nanosecond, 1},
		{time.Microsecond, 1},
		{time.Microsecond + 1, 2},
		{1500 * time.Microsecond, 1500},
		{24 * time.Hour, 86_400_000_000},
	} {
		assert.Equal(t, tc.want, micros(tc.d), "micros(%v)", tc.d)
	}
}

// TestCloseLeavesPool checks that a store made by New leaves its pool open,
// and that one made by Open closes its own.
func TestCloseLeavesPool(t *testing.T) {
	ctx := context.Background()
	pool := newPool(t, "", 0)
	s := newTestStore(t, pool, Config{})
	require.NoError(t, s.Close())
	require.NoError(t, pool.Ping(ctx), "pool after Store.Close")
	_, err := s.CleanupExpired(ctx)
	require.ErrorIs(t, err, dedupe.ErrClosed, "CleanupExpired after Close")
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dsn := testDSN(t)
	table := testTable(t)
	s, err := Open(ctx, dsn, Config{Table: table})
	require.NoError(t, err, "Open")
	k := dedupe.Key{Channel: "open", MessageID: "1"}
	require.NoError(t, s.Mark(ctx, k, time.Hour))
	ok, err := s.Exists(ctx, k)
	require.NoError(t, err, "Exists")
	require.True(t, ok, "Exists")
	pool := s.pool
	require.NoError(t, s.Close())
	require.Error(t, pool.Ping(ctx), "the pool of an Open store is still open after Close")

	_, err = Open(ctx, "postgres://nobody@127.0.0.1:1/none?connect_timeout=2", Config{})
	require.Error(t, err, "Open of an unreachable server succeeded")
	require.True(t, strings.HasPrefix(err.Error(), "dedupe: postgres:"), "Open error %q lacks the package prefix", err)
	_, err = Open(ctx, "::not a dsn::", Config{})
	require.Error(t, err, "Open of a malformed DSN succeeded")
}

// TestConcurrentNew checks that instances starting together on a missing
// table all succeed: creation is serialised by the advisory lock.
func TestConcurrentNew(t *testing.T) {
	pool := newPool(t, "", 8)
	table := testTable(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := New(context.Background(), pool, Config{Table: table})
			if err == nil {
				err = s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestClaimReleaseChurn races claims against releases of the same key, which
// makes the claim statement meet rows committed after its snapshot: at no
// moment may two callers hold the key.
func TestClaimReleaseChurn(t *testing.T) {
	pool := newPool(t, "", 8)
	rec := newRecorder()
	s := newTestStore(t, pool, Config{Logger: rec.logger()})
	ctx := context.Background()
	k := dedupe.Key{Channel: "churn", MessageID: "1"}
	var holders, claims atomic.Int64
	var wg sync.WaitGroup
	deadline := time.Now().Add(2 * time.Second)
	for range 32 {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				c, cSt, err := claimNew(ctx, s, k, time.Minute)
				if !assert.NoError(t, err, "Claim") {
					return
				}
				if cSt != dedupe.Claimed {
					if !assert.Equal(t, dedupe.InFlight, cSt, "Claim: want claimed or in flight") {
						return
					}
					continue
				}
				if !holdExclusively(t, s, c, &holders, &claims) {
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d claims, %d claim statements run again after a concurrent commit", claims.Load(), rec.count(msgClaimAgain))
	require.GreaterOrEqual(t, claims.Load(), int64(2), "claims: the race did not happen")
}

// TestQueryExecModes runs the store's statements under every pgx query
// execution mode, since the pool belongs to the caller: the default statement
// cache, and the modes used behind PgBouncer in transaction mode, which
// cannot keep prepared statements.
func TestQueryExecModes(t *testing.T) {
	table := testTable(t)
	ctx := context.Background()
	for _, mode := range []pgx.QueryExecMode{pgx.QueryExecModeCacheStatement, pgx.QueryExecModeCacheDescribe,
		pgx.QueryExecModeDescribeExec, pgx.QueryExecModeExec, pgx.QueryExecModeSimpleProtocol} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg, err := pgxpool.ParseConfig(testDSN(t))
			require.NoError(t, err)
			cfg.ConnConfig.DefaultQueryExecMode = mode
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			require.NoError(t, err)
			defer pool.Close()
			s := newTestStore(t, pool, Config{Table: table})
			k := dedupe.Key{Channel: "mode", MessageID: mode.String() + "-'quoted'; --"}
			ok, err := s.Exists(ctx, k)
			require.NoError(t, err, "Exists before Mark")
			require.False(t, ok, "Exists before Mark")
			c, cSt, err := claimNew(ctx, s, k, time.Minute)
			require.NoError(t, err, "Claim")
			require.Equal(t, dedupe.Claimed, cSt, "Claim")
			_, c2St, err := claimNew(ctx, s, k, time.Minute)
			require.NoError(t, err, "second Claim")
			require.Equal(t, dedupe.InFlight, c2St, "second Claim")
			require.NoError(t, s.Extend(ctx, c, time.Minute), "Extend")
			require.NoError(t, s.Release(ctx, c), "Release")
			require.NoError(t, s.Mark(ctx, k, time.Hour), "Mark")
			_, cSt, err = claimNew(ctx, s, k, time.Minute)
			require.NoError(t, err, "Claim after Mark")
			require.Equal(t, dedupe.Duplicate, cSt, "Claim after Mark")
			ok, err = s.Exists(ctx, k)
			require.NoError(t, err, "Exists after Mark")
			require.True(t, ok, "Exists after Mark")
			_, err = s.CleanupExpired(ctx)
			require.NoError(t, err, "CleanupExpired")
		})
	}
}

// TestLateClaimFenced plays Claims that reach the server after their own
// Release, as one sent on a connection that was given up can: they take
// nothing, whether the key was free or held by another copy's claim when they
// were released, while other tokens take the key as usual.
func TestLateClaimFenced(t *testing.T) {
	s := newTestStore(t, newPool(t, "", 0), Config{Lease: time.Minute})
	checkLateClaimFenced(t, s)
}

func checkLateClaimFenced(t *testing.T, st dedupe.Store) {
	ctx := context.Background()
	k := dedupe.Key{Channel: "fence", MessageID: randomHex(t, 8)}
	want := func(c dedupe.Claim, status dedupe.Status) {
		t.Helper()
		got, err := st.Claim(ctx, c, time.Minute)
		require.NoError(t, err, "Claim(%.6s)", c.Token)
		require.Equal(t, status, got, "Claim(%.6s)", c.Token)
	}
	release := func(c dedupe.Claim, want error) {
		t.Helper()
		require.ErrorIs(t, st.Release(ctx, c), want, "Release(%.6s)", c.Token)
	}
	// Two copies: a's claim lands, b's is late; both callers give up and release.
	a, b := dedupe.NewClaim(k), dedupe.NewClaim(k)
	want(a, dedupe.Claimed)
	release(b, dedupe.ErrNotOwner) // fenced beside a's live claim
	release(a, nil)
	want(b, dedupe.InFlight) // late: takes nothing
	want(a, dedupe.InFlight) // a's claim delivered twice: takes nothing
	// The key is free to anyone else, and the fences survive its next claim.
	c := dedupe.NewClaim(k)
	want(c, dedupe.Claimed)
	want(c, dedupe.Claimed) // idempotent
	require.NoError(t, st.Extend(ctx, c, time.Minute), "Extend")
	want(b, dedupe.InFlight)
	release(c, nil)
	want(a, dedupe.InFlight)
	// A free key: the release comes first, the claim never lands.
	k2 := dedupe.Key{Channel: "fence", MessageID: randomHex(t, 8)}
	d := dedupe.NewClaim(k2)
	release(d, dedupe.ErrNotOwner)
	want(d, dedupe.InFlight)
	ok, err := st.Exists(ctx, k2)
	require.NoError(t, err, "Exists of a fenced key")
	require.False(t, ok, "Exists of a fenced key")
	e := dedupe.NewClaim(k2)
	want(e, dedupe.Claimed)
	require.NoError(t, st.Mark(ctx, k2, time.Minute))
	want(d, dedupe.Duplicate)
	// The eight latest fences hold, however many tokens were released.
	k3 := dedupe.Key{Channel: "fence", MessageID: randomHex(t, 8)}
	var fenced []dedupe.Claim
	for range 20 {
		f := dedupe.NewClaim(k3)
		release(f, dedupe.ErrNotOwner)
		fenced = append(fenced, f)
	}
	for _, f := range fenced[len(fenced)-8:] {
		want(f, dedupe.InFlight)
	}
}
