package deduperedis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tests of this file run on the 6-node cluster of .ci/redis-cluster.sh
// (3 masters, 3 replicas, cluster-node-timeout 5000). They are not parallel:
// those that kill or stop a node restart it before they return.

// TestClusterSuite runs the conformance suite and the multi-instance race on
// the test cluster, on both layouts, the race both with keys spread over
// every master and with every key in one hash slot.
func TestClusterSuite(t *testing.T) {
	addrs := clusterAddrs(t)
	for _, layout := range []struct {
		name    string
		compact bool
	}{{"", false}, {"-compact", true}} {
		t.Run("conformance"+layout.name, func(t *testing.T) {
			runConformance(t, newClusterClient(t, addrs), deduperedis.Config{Compact: layout.compact})
		})
		for _, tag := range []string{"", "{one}"} {
			t.Run("race"+layout.name+tag, func(t *testing.T) {
				prefix := "dedupe-test:" + tag + randomID(t) + ":"
				stores := make([]*deduperedis.Store, 4)
				for i := range stores {
					stores[i] = newStore(t, newClusterClient(t, addrs), deduperedis.Config{Prefix: prefix,
						TTL: time.Minute, Lease: time.Minute, Compact: layout.compact})
				}
				raceStores(t, stores, 8, 500, "race")
			})
		}
	}
}

// TestClusterURL opens a store on the test cluster from a URL naming its
// nodes with addr=, through OpenURL and OpenClusterURL: every mark lands,
// whichever master owns its key (a client of one node would be answered
// MOVED for two thirds of them).
func TestClusterURL(t *testing.T) {
	addrs := clusterAddrs(t)
	urls := map[string]func(string, deduperedis.Config) (*deduperedis.Store, error){
		"redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2] + "&dial_timeout=1s": deduperedis.OpenURL,
		"redis://" + addrs[0]: deduperedis.OpenClusterURL,
	}
	ctx := context.Background()
	for url, open := range urls {
		st, err := open(url, deduperedis.Config{Prefix: "dedupe-test:" + randomID(t) + ":"})
		require.NoError(t, err, "open %s", url)
		for i := range 30 {
			k := dedupe.Key{Channel: "url", MessageID: strconv.Itoa(i)}
			assert.NoError(t, st.Mark(ctx, k, time.Minute), "%s: Mark(%s)", url, k)
			ok, err := st.Exists(ctx, k)
			assert.NoError(t, err, "%s: Exists(%s)", url, k)
			assert.True(t, ok, "%s: Exists(%s)", url, k)
		}
		assert.NoError(t, st.Close())
	}
}

// TestClusterStall stops one master with SIGSTOP for 4 s, less than the
// cluster-node-timeout so that no failover starts, while callers with a 1 s
// deadline claim and mark keys on every master: the calls on the keys of the
// two healthy masters all succeed.
func TestClusterStall(t *testing.T) {
	addrs := clusterAddrs(t)
	client := newClusterClient(t, addrs)
	st := newStore(t, client, deduperedis.Config{})
	prefix := deduperedis.Prefix(st)
	// The store checks its prefix's layout record at its first call, on the
	// record's master, which may be the one stalled: a gateway running
	// before the stall has checked it already.
	require.NoError(t, st.Ping(context.Background()), "Ping: the layout check")
	stalled, _ := masterWithReplica(t, addrs)
	var healthyFail, stalledFail, healthyOK atomic.Int64
	var firstHealthyErr atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 32 {
		onStalled := g%4 == 3 // a quarter of the callers on the stalled master's keys
		wg.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("%d-%d", g, n)
				node, err := client.MasterForKey(context.Background(), prefix+"stall:"+id)
				if err != nil || (node.Options().Addr == stalled.addr) != onStalled {
					continue
				}
				err = claimAndMark(st, dedupe.Key{Channel: "stall", MessageID: id}, time.Second)
				switch {
				case onStalled && err != nil:
					stalledFail.Add(1)
				case err != nil:
					healthyFail.Add(1)
					firstHealthyErr.CompareAndSwap(nil, err.Error())
				case !onStalled:
					healthyOK.Add(1)
				}
			}
		})
	}
	signal(t, stalled, syscall.SIGSTOP)
	stoppedAt := time.Now()
	time.Sleep(4 * time.Second) // the stall itself: the length of the fault, not a wait for a result
	signal(t, stalled, syscall.SIGCONT)
	close(stop)
	wg.Wait()
	waitClusterWhole(t, addrs, 30*time.Second)
	t.Logf("master %s stopped for %v: healthy-node keys %d ok, %d failed; stalled-node keys %d failed",
		stalled.addr, time.Since(stoppedAt).Round(time.Millisecond), healthyOK.Load(), healthyFail.Load(), stalledFail.Load())
	assert.Zero(t, healthyFail.Load(), "calls on keys of healthy masters failed during the stall; first: %v", firstHealthyErr.Load())
	assert.NotZero(t, healthyOK.Load(), "no call on the healthy masters completed during the stall")
}

// claimAndMark claims key with a new token and marks it if claimed, each call
// with its own timeout, and releases the claim if the mark failed.
func claimAndMark(st *deduperedis.Store, key dedupe.Key, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := dedupe.NewClaim(key)
	status, err := st.Claim(ctx, c, time.Minute)
	if err != nil || status != dedupe.Claimed {
		return err
	}
	return st.Mark(ctx, key, time.Minute)
}

// TestClusterReplicaLag stops a replica and cuts its link, marks messages whose keys its master
// owns, kills the master and lets the replica take over: without
// [deduperedis.Config.Replicas] every mark acknowledged while the replica was
// stopped is lost; with Replicas 1 none was acknowledged, and so none
// acknowledged is lost.
func TestClusterReplicaLag(t *testing.T) {
	addrs := clusterAddrs(t)
	client := newClusterClient(t, addrs)
	master, replica := masterWithReplica(t, addrs)
	prefix := "dedupe-test:" + randomID(t) + ":"
	async := newStore(t, client, deduperedis.Config{Prefix: prefix})
	durable := newStore(t, client, deduperedis.Config{Prefix: prefix, Replicas: 1, ReplicaTimeout: 100 * time.Millisecond, ClusterRetry: -1})
	ids := keysOwnedBy(t, client, prefix, "lag", master.addr, true, 400)
	before, asyncIDs, durableIDs := ids[:100], ids[100:300], ids[300:]
	ctx := context.Background()

	// With the replica up, the durable store's marks are confirmed.
	acked := map[string]bool{}
	for _, id := range before {
		require.NoError(t, durable.Mark(ctx, dedupe.Key{Channel: "lag", MessageID: id}, time.Hour), "durable Mark with the replica up")
		acked[id] = true
	}
	// Stop the replica and cut its link from the master's side: what the
	// master writes from now on reaches no replica (a stopped replica whose
	// link stayed open would read it from its socket buffer on SIGCONT).
	signal(t, replica, syscall.SIGSTOP)
	admin := redis.NewClient(&redis.Options{Addr: master.addr})
	defer admin.Close()
	require.NoError(t, admin.ClientKillByFilter(ctx, "TYPE", "replica").Err(), "CLIENT KILL TYPE replica")
	asyncAcked, _ := markAll(t, async, asyncIDs, acked)
	durableAcked, durableRefused := markAll(t, durable, durableIDs, acked)
	signal(t, master, syscall.SIGKILL)
	signal(t, replica, syscall.SIGCONT)
	waitPromoted(t, replica.addr, 60*time.Second)
	lost := map[string]int{}
	for id := range acked {
		ok, err := async.Exists(ctx, dedupe.Key{Channel: "lag", MessageID: id})
		require.NoError(t, err, "Exists after the failover")
		if !ok {
			lost[group(id, before, asyncIDs)]++
		}
	}
	restartNode(t, master, addrs)
	t.Logf("replica stopped: async store acknowledged %d marks, lost %d after the failover; durable store acknowledged %d, refused %d (ErrNotReplicated), lost %d; confirmed before the stop: %d, lost %d",
		asyncAcked, lost["async"], durableAcked, durableRefused, lost["durable"], len(before), lost["before"])
	assert.Zero(t, lost["durable"], "acknowledged marks of the durable store lost while the replica was stopped")
	assert.Zero(t, lost["before"], "acknowledged marks of the durable store lost before the replica was stopped")
	assert.Zero(t, durableAcked, "durable store acknowledged marks no replica confirmed")
	assert.NotZero(t, lost["async"], "no acknowledged mark of the async store was lost: the test did not cut the replica off")
}

// markAll marks the messages ids of channel "lag" on st, records those
// acknowledged in acked, and returns how many were acknowledged and how many
// refused with ErrNotReplicated. Any other error fails the test.
func markAll(t *testing.T, st *deduperedis.Store, ids []string, acked map[string]bool) (ok, refused int) {
	t.Helper()
	for _, id := range ids {
		err := st.Mark(context.Background(), dedupe.Key{Channel: "lag", MessageID: id}, time.Hour)
		switch {
		case err == nil:
			acked[id] = true
			ok++
		case errors.Is(err, deduperedis.ErrNotReplicated):
			refused++
		default:
			assert.NoError(t, err, "Mark with the replica stopped")
		}
	}
	return ok, refused
}

// group names the set of id.
func group(id string, before, async []string) string {
	for _, set := range []struct {
		name string
		ids  []string
	}{{"before", before}, {"async", async}} {
		for _, x := range set.ids {
			if x == id {
				return set.name
			}
		}
	}
	return "durable"
}

// waitPromoted waits until the server at addr is a master serving slots with
// the cluster ok, polling its state.
func waitPromoted(t testing.TB, addr string, timeout time.Duration) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	ctx := context.Background()
	deadline := time.Now().Add(timeout)
	for {
		repl, err := c.Info(ctx, "replication").Result()
		info, err2 := c.ClusterInfo(ctx).Result()
		if err == nil && err2 == nil && strings.Contains(repl, "role:master") && strings.Contains(info, "cluster_state:ok") {
			return
		}
		if time.Now().After(deadline) {
			require.Failf(t, "server not promoted", "%s after %v", addr, timeout)
		}
		time.Sleep(100 * time.Millisecond) // polling the servers' state
	}
}
