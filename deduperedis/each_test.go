package deduperedis_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
)

// The Redis tests of dedupe.BatchStore: the contract is dedupetest's
// "BatchStore" group, which the conformance tests run; these check how the
// store sends a batch (pipelines, the cluster's masters) and what a fault in
// the middle of one leaves.

// total returns how many pipelines h recorded, and their commands.
func (h *pipelines) total() (sent, cmds int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, names := range h.sent {
		cmds += len(names)
	}
	return len(h.sent), cmds
}

// newClaims returns n claims of new keys of channel.
func newClaims(channel string, n int) []dedupe.Claim {
	claims := make([]dedupe.Claim, n)
	for i := range claims {
		claims[i] = dedupe.NewClaim(dedupe.Key{Channel: channel, MessageID: fmt.Sprint(i)})
	}
	return claims
}

// keysOf returns the keys of claims.
func keysOf(claims []dedupe.Claim) []dedupe.Key {
	keys := make([]dedupe.Key, len(claims))
	for i, c := range claims {
		keys[i] = c.Key
	}
	return keys
}

// requireNoErrors fails t if any of errs is not nil.
func requireNoErrors(t *testing.T, errs []error, what string) {
	t.Helper()
	for i, err := range errs {
		require.NoError(t, err, "%s: item %d", what, i)
	}
}

// TestEachPipelines checks that each method of a batch is one pipeline per
// round trip, holding every item, and that a batch over the bound of a
// pipeline (1,000 commands) is split, each item still answered.
func TestEachPipelines(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	h := &pipelines{}
	client.AddHook(h)
	st := newStore(t, client, deduperedis.Config{})
	ctx := context.Background()
	require.NoError(t, st.Ping(ctx), "Ping: the layout check, before the pipelines are counted")
	for _, n := range []int{1, 64, 2500} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			claims := newClaims(fmt.Sprint("pipe", n), n)
			want := (n + 999) / 1000
			count := func(what string, f func()) {
				t.Helper()
				sent, cmds := h.total()
				f()
				sent2, cmds2 := h.total()
				assert.Equal(t, want, sent2-sent, "%s of %d items: pipelines", what, n)
				assert.Equal(t, n, cmds2-cmds, "%s of %d items: commands", what, n)
			}
			var statuses []dedupe.Status
			var errs []error
			count("ClaimEach", func() { statuses, errs = st.ClaimEach(ctx, claims, time.Minute) })
			requireNoErrors(t, errs, "ClaimEach")
			for i, s := range statuses {
				require.Equal(t, dedupe.Claimed, s, "ClaimEach: item %d", i)
			}
			count("ExtendEach", func() { errs = st.ExtendEach(ctx, claims, time.Minute) })
			requireNoErrors(t, errs, "ExtendEach")
			count("MarkEach", func() { errs = st.MarkEach(ctx, keysOf(claims), nil, time.Minute) })
			requireNoErrors(t, errs, "MarkEach")
			count("ReleaseEach", func() { errs = st.ReleaseEach(ctx, claims) })
			for i, err := range errs {
				require.ErrorIs(t, err, dedupe.ErrNotOwner, "ReleaseEach of marked keys: item %d", i)
			}
			statuses, errs = st.ClaimEach(ctx, newClaims(fmt.Sprint("pipe", n), n), time.Minute)
			requireNoErrors(t, errs, "ClaimEach of marked keys")
			for i, s := range statuses {
				require.Equal(t, dedupe.Duplicate, s, "ClaimEach of marked keys: item %d", i)
			}
		})
	}
}

// TestClusterEachManySlots runs batches whose keys span every master of a
// private cluster of three, and more than one pipeline's worth: each
// master's share goes to it, every item is answered, and the keys land on
// every master.
func TestClusterEachManySlots(t *testing.T) {
	t.Parallel()
	redisAddr(t)
	nodes := startCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	client := newClusterClient(t, addrs)
	st := newStore(t, client, deduperedis.Config{})
	ctx := context.Background()
	claims := newClaims("slots", 2500)
	claims = append(claims, claims[7], dedupe.NewClaim(claims[9].Key), dedupe.Claim{Key: dedupe.Key{Channel: "a:b", MessageID: "1"}, Token: "x"})
	statuses, errs := st.ClaimEach(ctx, claims, time.Minute)
	requireNoErrors(t, errs[:2502], "ClaimEach")
	for i := range 2501 {
		require.Equal(t, dedupe.Claimed, statuses[i], "ClaimEach: item %d", i)
	}
	assert.Equal(t, dedupe.InFlight, statuses[2501], "a second claim of a key in the batch, with another token")
	assert.ErrorIs(t, errs[2502], dedupe.ErrInvalidKey, "an invalid key in the batch")

	keys := keysOf(claims[:2500])
	results := make([][]byte, len(keys))
	for i := range results {
		results[i] = []byte(fmt.Sprint("result ", i))
	}
	requireNoErrors(t, st.MarkEach(ctx, keys, results, time.Minute), "MarkEach")
	for _, i := range []int{0, 1, 1234, 2499} {
		res, marked, err := st.Result(ctx, keys[i])
		require.NoError(t, err)
		require.True(t, marked, "Result(%s)", keys[i])
		require.Equal(t, results[i], res, "Result(%s)", keys[i])
	}
	statuses, errs = st.ClaimEach(ctx, newClaims("slots", 2500), time.Minute)
	requireNoErrors(t, errs, "ClaimEach of marked keys")
	for i, s := range statuses {
		require.Equal(t, dedupe.Duplicate, s, "ClaimEach of marked keys: item %d", i)
	}
	err := client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := node.DBSize(ctx).Result()
		if err == nil && n < 500 {
			err = fmt.Errorf("node %s holds %d keys of 2,500", node.Options().Addr, n)
		}
		return err
	})
	assert.NoError(t, err)
}

// TestEachCutMidway cuts the connection of a batch whose commands reached
// the server and whose replies were swallowed: every item fails, none is
// reported done; the same claims sent again are Claimed (the store
// recognises their tokens), and once released or marked nothing is left
// stranded. A mark cut the same way fails every item too, and lands when
// sent again.
func TestEachCutMidway(t *testing.T) {
	p, err := faultproxy.Start(redisAddr(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	// A connection of the pool silenced with the batch's fails after
	// ReadTimeout (5 s by default).
	client := newClient(t, p.Addr(), func(o *redis.Options) { o.MaxRetries, o.ReadTimeout = -1, 500*time.Millisecond })
	st := newStore(t, client, deduperedis.Config{})
	direct := newStore(t, newClient(t, redisAddr(t), nil), deduperedis.Config{Prefix: deduperedis.Prefix(st)})
	ctx := context.Background()
	require.NoError(t, st.Ping(ctx), "Ping: the layout check, before the cuts")
	claims := newClaims("cut", 64)

	raw := newClient(t, redisAddr(t), nil)
	// applied reports whether Redis holds values starting with head under
	// the keys of claims.
	applied := func(claims []dedupe.Claim, head string) func() bool {
		return func() bool {
			for _, c := range claims {
				v, err := raw.Get(ctx, deduperedis.Prefix(st)+c.Key.String()).Result()
				if err != nil || !strings.HasPrefix(v, head) {
					return false
				}
			}
			return true
		}
	}
	// cut runs f with the server's replies swallowed, waits until its
	// commands are done, and cuts the connections.
	cut := func(what string, f func() []error, done func() bool) {
		t.Helper()
		p.DropReplies(true)
		answer := make(chan []error, 1)
		go func() { answer <- f() }()
		until(t, what+" applied", done)
		p.DropReplies(false) // for the connections dialled next; the silent one stays silent
		p.Cut()
		errs := <-answer
		t.Logf("%s cut mid-way: %v; stats %+v", what, errs[0], p.Stats())
		for i, err := range errs {
			require.Error(t, err, "%s cut mid-way: item %d reported done", what, i)
		}
	}
	cut("ClaimEach", func() []error { _, errs := st.ClaimEach(ctx, claims, time.Minute); return errs }, applied(claims, "c:"))
	// The claims reached Redis: another token finds them held.
	statuses, errs := direct.ClaimEach(ctx, newClaims("cut", 64), time.Minute)
	requireNoErrors(t, errs, "ClaimEach with other tokens")
	for i, s := range statuses {
		require.Equal(t, dedupe.InFlight, s, "ClaimEach with other tokens: item %d", i)
	}
	statuses, errs = st.ClaimEach(ctx, claims, time.Minute)
	requireNoErrors(t, errs, "ClaimEach retried")
	for i, s := range statuses {
		require.Equal(t, dedupe.Claimed, s, "ClaimEach retried with the same claims: item %d", i)
	}
	requireNoErrors(t, st.ReleaseEach(ctx, claims[:32]), "ReleaseEach")
	keys := keysOf(claims[32:])
	cut("MarkEach", func() []error { return st.MarkEach(ctx, keys, nil, time.Minute) }, applied(claims[32:], "m"))
	requireNoErrors(t, st.MarkEach(ctx, keys, nil, time.Minute), "MarkEach retried")

	statuses, errs = direct.ClaimEach(ctx, newClaims("cut", 64), time.Minute)
	requireNoErrors(t, errs, "ClaimEach after the batch settled")
	for i, s := range statuses {
		want := dedupe.Claimed // released: nothing stranded
		if i >= 32 {
			want = dedupe.Duplicate
		}
		require.Equal(t, want, s, "ClaimEach after the batch settled: item %d", i)
	}
}

// TestEachNoScript flushes the script cache of a private server before
// batches: the items answered NOSCRIPT are sent again by EVAL and succeed.
func TestEachNoScript(t *testing.T) {
	redisAddr(t)
	srv := startServer(t)
	client := newClient(t, srv.Addr(), nil)
	st := newStore(t, client, deduperedis.Config{})
	ctx := context.Background()
	claims := newClaims("noscript", 100)
	for _, step := range []struct {
		name string
		run  func() []error
	}{
		{"ClaimEach", func() []error { _, errs := st.ClaimEach(ctx, claims, time.Minute); return errs }},
		{"ExtendEach", func() []error { return st.ExtendEach(ctx, claims, time.Minute) }},
		{"ReleaseEach", func() []error { return st.ReleaseEach(ctx, claims) }},
	} {
		require.NoError(t, client.ScriptFlush(ctx).Err())
		requireNoErrors(t, step.run(), step.name+" after SCRIPT FLUSH")
	}
	info, err := client.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Contains(t, info, "cmdstat_eval:calls=300,", "each item fell back on EVAL once")
}

// TestEachReplicasUnconfirmed runs batches on a store with Replicas 1 on the
// shared server, which has no replica: each Claim that took its key and each
// Mark fails with ErrNotReplicated (applied, unconfirmed); a Claim of a
// marked key, ExtendEach and ReleaseEach wait for no replica.
func TestEachReplicasUnconfirmed(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	st := newStore(t, client, deduperedis.Config{Replicas: 1, ReplicaTimeout: 50 * time.Millisecond})
	ctx := context.Background()
	claims := newClaims("replicas", 8)
	_, errs := st.ClaimEach(ctx, claims, time.Minute)
	for i, err := range errs {
		require.ErrorIs(t, err, deduperedis.ErrNotReplicated, "ClaimEach: item %d", i)
	}
	requireNoErrors(t, st.ExtendEach(ctx, claims, time.Minute), "ExtendEach")
	requireNoErrors(t, st.ReleaseEach(ctx, claims[:4]), "ReleaseEach")
	for i, err := range st.MarkEach(ctx, keysOf(claims[4:]), nil, time.Minute) {
		require.ErrorIs(t, err, deduperedis.ErrNotReplicated, "MarkEach: item %d", i)
	}
	statuses, errs := st.ClaimEach(ctx, claims[4:], time.Minute)
	requireNoErrors(t, errs, "ClaimEach of marked keys")
	for i, s := range statuses {
		require.Equal(t, dedupe.Duplicate, s, "ClaimEach of marked keys: item %d", i)
	}
}

// TestEachClosed checks that a batch on a closed store, or with a context
// that ended, fails every item without I/O.
func TestEachClosed(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	st := newStore(t, client, deduperedis.Config{})
	claims := newClaims("closed", 3)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, errs := st.ClaimEach(ctx, claims, 0)
	for i, err := range errs {
		require.ErrorIs(t, err, context.Canceled, "ClaimEach with a cancelled context: item %d", i)
	}
	require.NoError(t, st.Close())
	for i, err := range st.MarkEach(context.Background(), keysOf(claims), nil, 0) {
		require.ErrorIs(t, err, dedupe.ErrClosed, "MarkEach after Close: item %d", i)
	}
}

// TestClusterEachFailover runs batches of claims and marks on the test
// cluster while a replica takes over its master (CLUSTER FAILOVER, then
// back): the items on the moved slots are answered MOVED and sent again to
// the new master, every item of every batch succeeds, and every mark is
// there afterwards.
func TestClusterEachFailover(t *testing.T) { testClusterEachFailover(t, deduperedis.Config{}) }

// TestClusterCompactEachFailover is TestClusterEachFailover on the compact
// layout.
func TestClusterCompactEachFailover(t *testing.T) {
	testClusterEachFailover(t, deduperedis.Config{Compact: true})
}

func testClusterEachFailover(t *testing.T, cfg deduperedis.Config) {
	addrs := clusterAddrs(t)
	waitClusterWhole(t, addrs, 60*time.Second) // an earlier test may have restarted a node
	st := newStore(t, newClusterClient(t, addrs), cfg)
	master, replica := masterWithReplica(t, addrs)
	var stop atomic.Bool
	var batches atomic.Int64
	var marked []dedupe.Key
	done := make(chan error, 1)
	t.Cleanup(func() { // also when a failover failed the test
		stop.Store(true)
		for range done {
		}
	})
	go func() {
		defer close(done)
		for n := 0; !stop.Load(); n++ {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			claims := newClaims(fmt.Sprint("failover-", n), 64)
			_, errs := st.ClaimEach(ctx, claims, time.Minute)
			// Marks outlast the test: a run of over a minute (two failovers
			// on a loaded machine) must not find its first marks expired.
			errs = append(errs, st.MarkEach(ctx, keysOf(claims), nil, time.Hour)...)
			cancel()
			for _, err := range errs {
				if err != nil {
					done <- err
					return
				}
			}
			marked = append(marked, keysOf(claims)...)
			batches.Add(1)
		}
	}()
	failover := func(to clusterNode) {
		t.Helper()
		c := redis.NewClient(&redis.Options{Addr: to.addr})
		defer c.Close()
		before := batches.Load()
		ctx := context.Background()
		if info, _ := c.Info(ctx, "replication").Result(); strings.Contains(info, "role:master") {
			return
		}
		promoted := func() bool {
			info, err := c.Info(ctx, "replication").Result()
			return err == nil && strings.Contains(info, "role:master")
		}
		// A manual failover the master does not answer in time (a loaded
		// machine, a replica still catching up after an earlier test) is
		// given up by the replica: ask again, never with FORCE, which could
		// lose acknowledged marks.
		for attempt := 0; attempt < 4 && !promoted(); attempt++ {
			require.NoError(t, c.ClusterFailover(ctx).Err(), "CLUSTER FAILOVER at %s", to.addr)
			for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline) && !promoted(); {
				time.Sleep(100 * time.Millisecond) // polling the server's role
			}
		}
		require.True(t, promoted(), "%s not promoted after 4 CLUSTER FAILOVERs", to.addr)
		waitClusterWhole(t, addrs, 30*time.Second)
		waitFor(t, "batches after the failover", 20*time.Second, func() bool { return batches.Load() >= before+20 })
	}
	failover(replica)
	failover(master)
	stop.Store(true)
	require.NoError(t, <-done, "a batch during the failovers")
	ok := 0
	for _, k := range marked {
		if found, err := st.Exists(context.Background(), k); err == nil && found {
			ok++
		}
	}
	require.Equal(t, len(marked), ok, "marks found of those acknowledged")
	t.Logf("%d batches of 64, every mark found", batches.Load())
}
