package deduperedis_test

import (
	"context"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp/durabletest"
	"github.com/gatewaykit/dedupe/queue/queuetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/deduperedis"
)

// newQueue returns a queue named name on client, whose keys are deleted at
// the end of the test.
func newQueue(t *testing.T, client *redis.Client, cfg deduperedis.QueueConfig) *deduperedis.Queue {
	t.Helper()
	q, err := deduperedis.NewQueue(client, cfg)
	require.NoError(t, err, "NewQueue")
	t.Cleanup(func() { dropQueueKeys(client, cfg.Name) })
	return q
}

// dropQueueKeys deletes every key of the queue named name.
func dropQueueKeys(client *redis.Client, name string) { dropKeys(client, "{"+name+"}*") }

// dropKeys deletes the keys that match pattern.
func dropKeys(client *redis.Client, pattern string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := client.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		client.Del(ctx, iter.Val())
	}
}

func TestQueueConformance(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	queuetest.Run(t, queuetest.Config{
		New: func(t *testing.T, o queuetest.Options) queue.Queue {
			return newQueue(t, client, deduperedis.QueueConfig{
				Name: "dedupe-test:queue:" + randomID(t), Visibility: o.Visibility, Retention: o.Retention, MaxDepth: o.MaxDepth,
				PollInterval: 20 * time.Millisecond,
			})
		},
	})
}

// TestQueueKill kills a gateway whose Async queues in a Redis stream while
// handlers run, restarts it, and finds every accepted message processed
// exactly once. The marks are in Redis too.
func TestQueueKill(t *testing.T) {
	addr := redisAddr(t)
	durabletest.Kill(t, redisKillConfig(addr))
}

// TestQueuePoison sends a gateway that queues there a message whose handler
// kills its process: the message is failed after its three attempts, three
// processes killed, and the gateway lives on.
func TestQueuePoison(t *testing.T) {
	durabletest.Poison(t, redisKillConfig(redisAddr(t)))
}

// redisKillConfig is the deployment that Kill and Poison crash.
func redisKillConfig(addr string) durabletest.KillConfig {
	return durabletest.KillConfig{
		Open: func(t *testing.T, name, _ string) (queue.Queue, dedupe.Store) {
			client := newClient(t, addr, nil)
			q, err := deduperedis.NewQueue(client, deduperedis.QueueConfig{
				Name: "dedupe-test:" + name, Visibility: time.Second, PollInterval: 100 * time.Millisecond,
			})
			require.NoError(t, err)
			s, err := deduperedis.New(client, deduperedis.Config{Prefix: "dedupe-test:" + name + ":"})
			require.NoError(t, err)
			return q, s
		},
		Drop: func(t *testing.T, name string) {
			client := newClient(t, addr, nil)
			dropQueueKeys(client, "dedupe-test:"+name)
			dropKeys(client, "dedupe-test:"+name+":*")
		},
	}
}

// TestQueueLostKeys: a queue whose keys vanish under it (a flush, a server
// that evicts) recreates its stream and group, and still acknowledges a
// message whose state is gone.
func TestQueueLostKeys(t *testing.T) {
	client := newClient(t, redisAddr(t), nil)
	name := "dedupe-test:queue:" + randomID(t)
	q := newQueue(t, client, deduperedis.QueueConfig{Name: name, PollInterval: 20 * time.Millisecond})
	defer q.Close()
	ctx := t.Context()
	m := queue.Message{ID: "m1", Key: dedupe.Key{Channel: "t", MessageID: randomID(t)}, Method: "POST", Target: "/"}
	_, _, err := q.Push(ctx, m)
	require.NoError(t, err)
	d, err := q.Take(ctx)
	require.NoError(t, err)
	require.NoError(t, client.Del(ctx, "{"+name+"}:s:m1").Err())
	require.NoError(t, q.Update(ctx, d, queue.Change{State: queue.StateDone}), "done without a state")
	c, err := q.Count(ctx)
	require.NoError(t, err, "Count")
	require.Zero(t, c.Live, "Count = %+v; want the entry acknowledged and deleted", c)
	dropQueueKeys(client, name) // the stream and its group are gone
	m.ID = "m2"
	_, added, err := q.Push(ctx, m)
	require.NoError(t, err, "Push after the flush")
	require.True(t, added, "Push after the flush")
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err = q.Take(tctx)
	require.NoError(t, err, "Take after the flush")
	require.Equal(t, "m2", d.ID, "Take after the flush")
}
