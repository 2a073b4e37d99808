package deduperedis_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// unit is the conformance suite's time unit. Redis decides expiry by its own
// clock, so the suite sleeps. The suite's leases are 10 units and its tightest
// margin 3 units; at 100 ms, 64 racers under -race on a loaded 2-core machine
// sometimes outlived a 1 s lease, so 200 ms.
const unit = 200 * time.Millisecond

func TestConformance(t *testing.T) {
	t.Parallel()
	client := newClient(t, redisAddr(t), nil)
	runConformance(t, client, deduperedis.Config{})
}

// TestCompactConformance runs the suite on the compact layout.
func TestCompactConformance(t *testing.T) {
	t.Parallel()
	client := newClient(t, redisAddr(t), nil)
	runConformance(t, client, deduperedis.Config{Compact: true})
}

// TestCompactScriptedConformance runs the suite on the compact layout as a
// server older than Redis 7.0 has it run: every call one script.
func TestCompactScriptedConformance(t *testing.T) {
	t.Parallel()
	client := newClient(t, redisAddr(t), nil)
	runConformance(t, client, deduperedis.Config{Compact: true}, deduperedis.UseScripts)
}

// TestClusterConformance runs the suite through a ClusterClient against a
// private cluster of three nodes, which checks that every operation is
// routed by its one key, that the scripts run under Cluster's rules, and that
// the pipelines of a batch are split by node.
func TestClusterConformance(t *testing.T) {
	t.Parallel()
	testClusterConformance(t, deduperedis.Config{})
}

// TestClusterCompactConformance is TestClusterConformance on the compact
// layout, whose buckets, indexes and claims of a shard share a slot.
func TestClusterCompactConformance(t *testing.T) {
	t.Parallel()
	testClusterConformance(t, deduperedis.Config{Compact: true})
}

func testClusterConformance(t *testing.T, cfg deduperedis.Config) {
	redisAddr(t)
	nodes := startCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	runConformance(t, client, cfg)
	// Every node took keys.
	ctx := context.Background()
	err := client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.DBSize(ctx).Result()
		if err == nil && n == 0 {
			err = fmt.Errorf("node %s holds no key", node.Options().Addr)
		}
		return err
	})
	assert.NoError(t, err)
}

// runConformance runs the conformance suite on stores of client configured
// by cfg, each with a prefix of its own, so each is isolated
// (dedupetest.Options.Isolated). A compact store gets no MarkForever: no
// other program writes its buckets.
func runConformance(t *testing.T, client redis.UniversalClient, cfg deduperedis.Config, then ...func(*deduperedis.Store)) {
	var mu sync.Mutex
	prefixes := map[dedupe.Store]string{}
	suite := dedupetest.Config{
		New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
			prefix := "dedupe-test:" + randomID(t) + ":"
			cfg := cfg
			cfg.Prefix, cfg.TTL, cfg.Lease = prefix, o.TTL, o.Lease
			s, err := deduperedis.New(client, cfg)
			require.NoError(t, err, "New")
			for _, f := range then {
				f(s)
			}
			mu.Lock()
			defer mu.Unlock()
			prefixes[s] = prefix
			return s
		},
		RealTime: true,
		Unit:     unit,
	}
	if !cfg.Compact {
		// A mark without a TTL, as another program may write one; deleted
		// at the end of the test.
		suite.MarkForever = func(t *testing.T, st dedupe.Store, k dedupe.Key) {
			mu.Lock()
			key := prefixes[st] + k.String()
			mu.Unlock()
			require.NoError(t, client.Set(context.Background(), key, "m", 0).Err(), "SET %s", key)
			t.Cleanup(func() { _ = client.Del(context.Background(), key).Err() })
		}
	}
	dedupetest.Run(t, suite)
}

func TestNewValidates(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = client.Close() })
	for _, tc := range []struct {
		name   string
		client redis.UniversalClient
		cfg    deduperedis.Config
		want   string
	}{
		{"nil client", nil, deduperedis.Config{}, "nil client"},
		{"nil *Client", (*redis.Client)(nil), deduperedis.Config{}, "nil client"},
		{"nil *ClusterClient", (*redis.ClusterClient)(nil), deduperedis.Config{}, "nil client"},
		{"negative TTL", client, deduperedis.Config{TTL: -time.Second}, "negative TTL"},
		{"negative lease", client, deduperedis.Config{Lease: -time.Second}, "negative lease"},
		{"negative Shards", client, deduperedis.Config{Compact: true, Shards: -1}, "negative Shards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := deduperedis.New(tc.client, tc.cfg)
			require.ErrorContains(t, err, tc.want, "New = %v", s)
			require.True(t, strings.HasPrefix(err.Error(), "dedupe: "), "New error %q", err)
			require.Nil(t, s, "New returned a store with an error")
		})
	}
	s, err := deduperedis.New(client, deduperedis.Config{})
	require.NoError(t, err, "New with defaults")
	assert.Equal(t, "redis", s.Backend())
}

// TestInvalidInputNoIO checks that invalid keys and foreign claims are refused
// before any I/O: the client points at a port where nothing listens.
func TestInvalidInputNoIO(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = client.Close() })
	s, err := deduperedis.New(client, deduperedis.Config{})
	require.NoError(t, err)
	ctx := context.Background()
	bad := dedupe.Key{Channel: "a:b", MessageID: "1"}
	_, _, err = claimNew(ctx, s, bad, 0)
	assert.ErrorIs(t, err, dedupe.ErrInvalidKey, "Claim(invalid)")
	good := dedupe.Key{Channel: "telegram", MessageID: "1"}
	for _, c := range []dedupe.Claim{
		{Key: good, Token: ""},
		{Key: good, Token: "with space"},
		{Key: good, Token: strings.Repeat("A", 65)},
	} {
		assert.ErrorIs(t, s.Release(ctx, c), dedupe.ErrNotOwner, "Release(%+v)", c)
		assert.ErrorIs(t, s.Extend(ctx, c, 0), dedupe.ErrNotOwner, "Extend(%+v)", c)
	}
	// A real call fails with a wrapped connection error, not a status.
	c, cSt, err := claimNew(ctx, s, good, 0)
	if assert.Error(t, err, "Claim with no server = %+v", c) {
		assert.True(t, strings.HasPrefix(err.Error(), "dedupe: redis: claim telegram:1: "), "Claim with no server = %v; want a wrapped error", err)
	}
	assert.Zero(t, cSt, "Claim with no server")
	assert.Error(t, s.Ping(ctx), "Ping with no server succeeded")
}

// TestLayout checks the default prefix, TTL and lease, and the values stored,
// by reading Redis directly.
func TestLayout(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	s, err := deduperedis.New(client, deduperedis.Config{})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	id := randomID(t)
	marked := dedupe.Key{Channel: "layout", MessageID: id + "-m"}
	claimed := dedupe.Key{Channel: "layout", MessageID: id + "-c"}
	t.Cleanup(func() { client.Del(ctx, "dedupe:"+marked.String(), "dedupe:"+claimed.String()) })

	require.NoError(t, s.Mark(ctx, marked, 0))
	c, cSt, err := claimNew(ctx, s, claimed, 0)
	require.NoError(t, err, "Claim = %+v", c)
	require.Equal(t, dedupe.Claimed, cSt, "Claim = %+v", c)
	for _, tc := range []struct {
		key      string
		value    string
		ttl, tol time.Duration
	}{
		{"dedupe:layout:" + id + "-m", "m", dedupe.DefaultTTL, time.Minute},
		{"dedupe:layout:" + id + "-c", "c:" + c.Token, dedupe.DefaultLease, time.Minute},
	} {
		v, err := client.Get(ctx, tc.key).Result()
		assert.NoError(t, err, "GET %s", tc.key)
		assert.Equal(t, tc.value, v, "GET %s", tc.key)
		ttl, err := client.PTTL(ctx, tc.key).Result()
		assert.NoError(t, err, "PTTL %s", tc.key)
		assert.LessOrEqual(t, ttl, tc.ttl, "PTTL %s: want about %v", tc.key, tc.ttl)
		assert.GreaterOrEqual(t, ttl, tc.ttl-tc.tol, "PTTL %s: want about %v", tc.key, tc.ttl)
	}
	require.NoError(t, s.Extend(ctx, c, 0))

	// A value the store did not write counts as a claim held by someone else.
	foreign := dedupe.Key{Channel: "layout", MessageID: id + "-f"}
	client.Set(ctx, "dedupe:"+foreign.String(), "something else", time.Minute)
	t.Cleanup(func() { client.Del(ctx, "dedupe:"+foreign.String()) })
	ok, err := s.Exists(ctx, foreign)
	assert.NoError(t, err, "Exists(foreign)")
	assert.False(t, ok, "Exists(foreign)")
	c, cSt, err = claimNew(ctx, s, foreign, 0)
	assert.NoError(t, err, "Claim(foreign) = %+v", c)
	assert.Equal(t, dedupe.InFlight, cSt, "Claim(foreign) = %+v; want in flight", c)
}

// TestPrefix checks that stores share keys exactly when they share a prefix.
func TestPrefix(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	p := "dedupe-test:" + randomID(t) + ":"
	a := newStore(t, client, deduperedis.Config{Prefix: p + "a:"})
	a2 := newStore(t, client, deduperedis.Config{Prefix: p + "a:"})
	b := newStore(t, client, deduperedis.Config{Prefix: p + "b:"})
	ctx := context.Background()
	k := dedupe.Key{Channel: "telegram", MessageID: "42"}
	require.NoError(t, a.Mark(ctx, k, time.Minute))
	ok, _ := a2.Exists(ctx, k)
	assert.True(t, ok, "a store with the same prefix does not see the mark")
	ok, _ = b.Exists(ctx, k)
	assert.False(t, ok, "a store with another prefix sees the mark")
	_, cSt, _ := claimNew(ctx, b, k, time.Minute)
	assert.Equal(t, dedupe.Claimed, cSt, "Claim under another prefix")
}

// TestClientOwnership checks that Close leaves a client given to New open, and
// that a store made by OpenURL closes its own.
func TestClientOwnership(t *testing.T) {
	addr := redisAddr(t)
	client := newClient(t, addr, nil)
	s := newStore(t, client, deduperedis.Config{})
	require.NoError(t, s.Close())
	require.NoError(t, client.Ping(context.Background()).Err(), "client closed with the store")
	assert.ErrorIs(t, s.Ping(context.Background()), dedupe.ErrClosed, "Ping after Close")

	u, err := deduperedis.OpenURL("redis://"+addr+"/0", deduperedis.Config{Prefix: "dedupe-test:" + randomID(t) + ":"})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, u.Ping(ctx), "Ping")
	k := dedupe.Key{Channel: "url", MessageID: "1"}
	require.NoError(t, u.Mark(ctx, k, time.Minute))
	ok, err := u.Exists(ctx, k)
	require.NoError(t, err, "Exists")
	require.True(t, ok, "Exists")
	require.NoError(t, u.Close())
	require.NoError(t, u.Close(), "second Close")
	_, err = u.Exists(ctx, k)
	assert.ErrorIs(t, err, dedupe.ErrClosed, "Exists after Close")
}

func TestOpenURLErrors(t *testing.T) {
	for _, url := range []string{"http://127.0.0.1:6379", "redis://user:s3cret@127.0.0.1:6379/notadb", "redis://127.0.0.1:6379?bogus=1",
		"redis://user:s3cret@127.0.0.1:7000?addr=127.0.0.1:7001&bogus=1", "http://user:s3cret@127.0.0.1:7000?addr=127.0.0.1:7001"} {
		s, err := deduperedis.OpenURL(url, deduperedis.Config{})
		if !assert.Error(t, err, "OpenURL(%q) succeeded", url) {
			s.Close()
			continue
		}
		assert.True(t, strings.HasPrefix(err.Error(), "dedupe: redis: "), "OpenURL(%q) error %q", url, err)
		assert.NotContains(t, err.Error(), "s3cret", "OpenURL(%q) error", url)
	}
	_, err := deduperedis.OpenURL("redis://127.0.0.1:6379/0", deduperedis.Config{TTL: -1})
	assert.Error(t, err, "OpenURL with a negative TTL succeeded")
	_, err = deduperedis.OpenClusterURL("redis://127.0.0.1:7000", deduperedis.Config{Replicas: -1})
	assert.Error(t, err, "OpenClusterURL with negative Replicas succeeded")
}

// TestNewValidatesReplicas checks the options of Config.Replicas.
func TestNewValidatesReplicas(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer client.Close()
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})
	defer ring.Close()
	for _, tc := range []struct {
		client redis.UniversalClient
		cfg    deduperedis.Config
	}{
		{client, deduperedis.Config{Replicas: -1}},
		{client, deduperedis.Config{Replicas: 1, ReplicaTimeout: -time.Second}},
		{ring, deduperedis.Config{Replicas: 1}},
	} {
		s, err := deduperedis.New(tc.client, tc.cfg)
		if !assert.Error(t, err, "New(%T, %+v) succeeded", tc.client, tc.cfg) {
			s.Close()
		}
	}
	s, err := deduperedis.New(ring, deduperedis.Config{})
	if assert.NoError(t, err, "New(Ring) without Replicas") {
		s.Close()
	}
}

// TestLateClaimFenced plays Claims that reach the server after their own
// Release, as one sent on a connection that was given up can: they take
// nothing, whether the key was free or held by another copy's claim when they
// were released, while other tokens take the key as usual.
func TestLateClaimFenced(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	st := newStore(t, client, deduperedis.Config{Lease: time.Minute})
	checkLateClaimFenced(t, st)
}

func checkLateClaimFenced(t *testing.T, st dedupe.Store) {
	ctx := context.Background()
	k := dedupe.Key{Channel: "fence", MessageID: randomID(t)}
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
	k2 := dedupe.Key{Channel: "fence", MessageID: randomID(t)}
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
	k3 := dedupe.Key{Channel: "fence", MessageID: randomID(t)}
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
