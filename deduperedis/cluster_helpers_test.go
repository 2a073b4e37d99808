package deduperedis_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// clusterEnv names the environment variable holding the comma-separated
// addresses of a Redis Cluster of 3 masters and 3 replicas, as
// .ci/redis-cluster.sh starts it. The tests that kill or stop its nodes
// restart them, and leave it with 3 masters and 3 replicas.
const clusterEnv = "DEDUPE_REDIS_CLUSTER_ADDRS"

// clusterAddrs returns the addresses of the test cluster, or skips the test.
func clusterAddrs(t testing.TB) []string {
	t.Helper()
	v := os.Getenv(clusterEnv)
	if v == "" {
		t.Skipf("%s is not set; start a cluster with `.ci/redis-cluster.sh start DIR` and set it to the addresses it prints to run the Redis Cluster tests", clusterEnv)
	}
	return strings.Split(v, ",")
}

// newClusterClient returns a client of the test cluster with the options the
// package documentation recommends, closed at the end of the test.
func newClusterClient(t testing.TB, addrs []string) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      addrs,
		ContextTimeoutEnabled:      true,
		ClusterStateReloadInterval: 5 * time.Second,
		DialTimeout:                time.Second,
		ReadTimeout:                2 * time.Second,
		WriteTimeout:               2 * time.Second,
	})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.Ping(ctx).Err(), "cluster at %v does not answer", addrs)
	return c
}

// clusterNode is one redis-server of the test cluster.
type clusterNode struct {
	addr, id, master string // master: the id of its master, for a replica
	pid              int
	conf             string // its config file, to start it again
}

// nodesOf returns the nodes of the cluster as addr's node sees them, with
// the pid and config file of each node that answers.
func nodesOf(t testing.TB, addr string) []clusterNode {
	t.Helper()
	ctx := context.Background()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	text, err := admin.ClusterNodes(ctx).Result()
	require.NoError(t, err, "CLUSTER NODES at %s", addr)
	var nodes []clusterNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || strings.Contains(f[2], "fail") || strings.Contains(f[2], "noaddr") {
			continue
		}
		n := clusterNode{addr: strings.Split(f[1], "@")[0], id: f[0]}
		if strings.Contains(f[2], "slave") {
			n.master = f[3]
		}
		n.pid, n.conf = serverProcess(t, n.addr)
		nodes = append(nodes, n)
	}
	return nodes
}

// serverProcess returns the pid and config file of the server at addr.
func serverProcess(t testing.TB, addr string) (int, string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	info, err := c.Info(context.Background(), "server").Result()
	require.NoError(t, err, "INFO server at %s", addr)
	var pid int
	var conf string
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
		if v, ok := strings.CutPrefix(line, "config_file:"); ok {
			conf = v
		}
	}
	return pid, conf
}

// masterWithReplica returns a master of the cluster and its replica.
func masterWithReplica(t testing.TB, addrs []string) (master, replica clusterNode) {
	t.Helper()
	nodes := nodesOf(t, addrs[0])
	for _, m := range nodes {
		for _, r := range nodes {
			if r.master == m.id && m.master == "" {
				return m, r
			}
		}
	}
	require.Failf(t, "no master with a replica", "among %v", nodes)
	return
}

// signal sends sig to the server n, a process of this machine's test cluster.
func signal(t testing.TB, n clusterNode, sig syscall.Signal) {
	t.Helper()
	require.NoError(t, syscall.Kill(n.pid, sig), "kill -%d %d (%s)", sig, n.pid, n.addr)
}

// restartNode starts the killed server n again from its config file (which
// daemonizes it and rewrites its pid file): it rejoins the cluster, as a
// replica if it was failed over. It waits until the cluster is whole again.
func restartNode(t testing.TB, n clusterNode, addrs []string) {
	t.Helper()
	out, err := exec.Command("redis-server", n.conf).CombinedOutput()
	require.NoError(t, err, "redis-server %s: %s", n.conf, out)
	waitClusterWhole(t, addrs, 60*time.Second)
}

// waitClusterWhole waits until every node answers, sees the cluster ok and
// every replica's link to its master is up, polling the servers' state.
func waitClusterWhole(t testing.TB, addrs []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := clusterWhole(addrs)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			require.NoError(t, err, "cluster not whole after %v", timeout)
		}
		time.Sleep(100 * time.Millisecond) // polling the servers' gossip, not waiting out a TTL
	}
}

// clusterWhole returns nil if every node answers, sees the cluster ok and,
// for a replica, its link to its master up, and there are 3 masters.
func clusterWhole(addrs []string) error {
	ctx := context.Background()
	masters := 0
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second})
		info, err := c.ClusterInfo(ctx).Result()
		var repl string
		if err == nil {
			repl, err = c.Info(ctx, "replication").Result()
		}
		_ = c.Close()
		switch {
		case err != nil:
			return fmt.Errorf("%s: %w", a, err)
		case !strings.Contains(info, "cluster_state:ok"):
			return fmt.Errorf("%s: cluster state not ok", a)
		case strings.Contains(repl, "role:master"):
			masters++
		case !strings.Contains(repl, "master_link_status:up"):
			return fmt.Errorf("%s: replica link down", a)
		}
	}
	if masters != 3 {
		return fmt.Errorf("%d masters", masters)
	}
	return nil
}

// keysOwnedBy returns n message ids of channel whose store keys (prefix +
// channel + ":" + id) the master at addr owns, or, if not, that it does not.
func keysOwnedBy(t testing.TB, c *redis.ClusterClient, prefix, channel string, addr string, owned bool, n int) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := 0; len(ids) < n; i++ {
		id := strconv.Itoa(i)
		node, err := c.MasterForKey(ctx, prefix+channel+":"+id)
		require.NoError(t, err)
		if (node.Options().Addr == addr) == owned {
			ids = append(ids, id)
		}
	}
	return ids
}
