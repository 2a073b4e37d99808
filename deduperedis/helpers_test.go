package deduperedis_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/deduperedis"
)

// addrEnv names the environment variable holding the address of the shared
// Redis server the tests use, such as 127.0.0.1:6379.
const addrEnv = "DEDUPE_REDIS_ADDR"

// requireEnv names the environment variable that, set to 1, turns the skip of
// a test whose server is not configured into a failure: a run meant to have
// the servers, such as .ci/run, then cannot pass with the store tests skipped.
const requireEnv = "DEDUPE_REQUIRE_SERVERS"

// redisAddr returns the address of the shared test server, or skips the test
// (fails it when DEDUPE_REQUIRE_SERVERS=1).
func redisAddr(t testing.TB) string {
	t.Helper()
	addr := os.Getenv(addrEnv)
	if addr == "" {
		skipOrFail(t, addrEnv+" is not set; set it to a Redis server's address (for example 127.0.0.1:6379) to run the Redis tests")
	}
	return addr
}

// skipOrFail skips tb with msg, or fails it with msg when
// DEDUPE_REQUIRE_SERVERS=1.
func skipOrFail(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv(requireEnv) == "1" {
		require.FailNow(tb, msg+" ("+requireEnv+"=1: failing instead of skipping)")
	}
	tb.Skip(msg)
}

// newClient returns a client of addr, checked with a PING and closed at the
// end of the test. mod, if not nil, adjusts its options first.
func newClient(t testing.TB, addr string, mod func(*redis.Options)) *redis.Client {
	t.Helper()
	opt := &redis.Options{Addr: addr, ContextTimeoutEnabled: true}
	if mod != nil {
		mod(opt)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, c.Ping(ctx).Err(), "Redis at %s does not answer", addr)
	return c
}

// newStore returns a store on client with a prefix unique to the test.
func newStore(t testing.TB, client redis.UniversalClient, cfg deduperedis.Config) *deduperedis.Store {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = "dedupe-test:" + randomID(t) + ":"
	}
	s, err := deduperedis.New(client, cfg)
	require.NoError(t, err, "New")
	t.Cleanup(func() {
		_ = s.Close()
		client.Del(context.Background(), cfg.Prefix+deduperedis.LayoutKey) // it never expires
	})
	return s
}

func randomID(t testing.TB) string {
	var b [8]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return hex.EncodeToString(b[:])
}

// server is a redis-server process owned by a test, on a loopback port of its
// own, so that it can be killed and restarted without disturbing other tests.
type server struct {
	t    testing.TB
	bin  string
	port int
	dir  string
	args []string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// startServer starts a private redis-server with extra arguments, or skips the
// test if redis-server is not on PATH. The server is killed at the end of the
// test.
func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	return startServerOn(t, nil, extra...)
}

// startServerOn is startServer trying the ports of ports first, then free
// ones.
func startServerOn(t testing.TB, ports []int, extra ...string) *server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not on PATH; install it (Debian: apt-get install redis-server) to run the tests that stop and restart a server")
	}
	s := &server{t: t, bin: bin, dir: t.TempDir()}
	t.Cleanup(s.kill)
	for attempt := 0; ; attempt++ {
		s.port = freePort(t)
		if attempt < len(ports) {
			s.port = ports[attempt]
		}
		s.args = append([]string{
			"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", s.dir,
		}, extra...)
		err := s.start()
		if err == nil {
			return s
		}
		if attempt == len(ports)+2 {
			require.NoError(t, err)
		}
		t.Logf("retrying on another port: %v", err)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr returns the server's address.
func (s *server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// start starts the process and waits until it answers PING.
func (s *server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("redis-server already running")
	}
	var log bytes.Buffer
	cmd := exec.Command(s.bin, s.args...)
	cmd.Dir = s.dir
	cmd.Stdout = &log
	cmd.Stderr = &log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			return fmt.Errorf("redis-server %v exited: %s", s.args, log.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d does not answer: %v; log: %s", s.port, err, log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restart starts the server again after kill, on the same port and directory.
func (s *server) restart() {
	s.t.Helper()
	require.NoError(s.t, s.start())
}

// kill stops the server with SIGKILL and waits for it to exit. It does nothing
// if the server is not running.
func (s *server) kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

// startCluster starts a private Redis Cluster of n nodes, which share the
// slots evenly, and waits until every node sees the cluster's state ok.
func startCluster(t testing.TB, n int) []*server {
	t.Helper()
	nodes := make([]*server, n)
	clients := make([]*redis.Client, n)
	ctx := context.Background()
	for i := range nodes {
		nodes[i] = startServer(t, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-announce-ip", "127.0.0.1")
		clients[i] = redis.NewClient(&redis.Options{Addr: nodes[i].Addr()})
		defer clients[i].Close()
		first, last := i*16384/n, (i+1)*16384/n-1
		require.NoError(t, clients[i].Do(ctx, "CLUSTER", "ADDSLOTSRANGE", first, last).Err(), "CLUSTER ADDSLOTSRANGE %d %d", first, last)
	}
	for _, node := range nodes[1:] {
		require.NoError(t, clients[0].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(node.port)).Err(), "CLUSTER MEET")
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range clients {
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") &&
				strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", n)) {
				break
			}
			if time.Now().After(deadline) {
				require.Failf(t, "cluster state not ok", "%v %s", err, info)
			}
			time.Sleep(50 * time.Millisecond) // polling the servers' gossip, not waiting out a TTL
		}
	}
	return nodes
}

// claimNew claims key on st with a new token: the claim, its status and the
// error.
func claimNew(ctx context.Context, st dedupe.Store, key dedupe.Key, lease time.Duration) (dedupe.Claim, dedupe.Status, error) {
	c := dedupe.NewClaim(key)
	status, err := st.Claim(ctx, c, lease)
	return c, status, err
}
