package deduperedis_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// ServerMemory reads the server's INFO memory: its limit and policy as
// configured, and a used_memory that grows with the marks; on a cluster the
// masters' sums.
func TestServerMemory(t *testing.T) {
	t.Parallel()
	redisAddr(t)
	ctx := context.Background()
	single := startServer(t, "--maxmemory", "32mb", "--maxmemory-policy", "volatile-ttl")
	nodes := startCluster(t, 3)
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cluster.Close() })
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
		max    int64
		policy string
	}{
		{"single", newClient(t, single.Addr(), nil), 32 << 20, "volatile-ttl"},
		{"cluster", cluster, 0, "noeviction"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t, c.client, deduperedis.Config{})
			before, err := s.ServerMemory(ctx)
			require.NoError(t, err)
			assert.Equal(t, c.max, before.Max, "maxmemory")
			assert.Equal(t, c.policy, before.Policy, "maxmemory_policy")
			assert.Positive(t, before.Startup, "used_memory_startup")
			assert.GreaterOrEqual(t, before.Used, before.Startup, "used_memory")

			const n = 5000
			keys := make([]dedupe.Key, n)
			exps := make([]time.Time, n)
			for i := range keys {
				keys[i] = dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + i)}
				exps[i] = time.Now().Add(time.Hour)
			}
			_, err = s.MarkUntil(ctx, keys, exps)
			require.NoError(t, err)
			after, err := s.ServerMemory(ctx)
			require.NoError(t, err)
			// Each mark takes some 150 bytes (BenchmarkBytesPerMark): far
			// more than the 50 a mark is allowed here for noise.
			assert.Greater(t, after.Used-before.Used, int64(n*50), "used_memory after %d marks", n)

			require.NoError(t, s.Close())
			_, err = s.ServerMemory(ctx)
			assert.ErrorIs(t, err, dedupe.ErrClosed)
		})
	}
}
