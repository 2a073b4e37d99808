package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// redisURL returns the test server's URL, or skips t (fails it when
// DEDUPE_REQUIRE_SERVERS=1).
func redisURL(t testing.TB) string {
	t.Helper()
	addr := os.Getenv("DEDUPE_REDIS_ADDR")
	if addr == "" {
		msg := "DEDUPE_REDIS_ADDR is not set; set it to a Redis server's address (for example 127.0.0.1:6379): the stream is on Redis"
		if os.Getenv("DEDUPE_REQUIRE_SERVERS") == "1" {
			require.Fail(t, msg+" (DEDUPE_REQUIRE_SERVERS=1: failing instead of skipping)")
		}
		t.Skip(msg)
	}
	return "redis://" + addr + "/0"
}

// The demonstration on each store: every message is processed once, the
// failed ones ran a second time in a later batch, the producer's retries
// and the repeats of a batch were acknowledged as duplicates, the entry
// without an id is a dead letter, and nothing is left pending.
func TestRun(t *testing.T) {
	url := redisURL(t)
	for _, store := range []string{"redis", "memory", "sqlite:" + filepath.Join(t.TempDir(), "marks.db")} {
		t.Run(store[:min(len(store), 6)], func(t *testing.T) {
			cfg := Config{RedisURL: url, Store: store, Messages: 200, Consumers: 3, Batch: 64, FailEvery: 10, Timeout: time.Minute}
			rep, err := Run(context.Background(), cfg)
			require.NoError(t, err)
			require.NoError(t, rep.Check(cfg))
			for id, runs := range rep.Runs {
				want := 1
				if numberOf(id)%cfg.FailEvery == 0 {
					want = 2
				}
				assert.Equal(t, want, runs, "runs of %s", id)
			}
			var acked, dups, biggest int
			for _, o := range rep.Steps {
				acked += o.Processed + o.Duplicates + o.Dead
				dups += o.Duplicates
				biggest = max(biggest, o.Taken)
			}
			assert.GreaterOrEqual(t, acked, rep.Entries, "entries acknowledged (an entry claimed again while its batch ran is acknowledged twice)")
			assert.GreaterOrEqual(t, dups, rep.Entries-1-cfg.Messages, "the producer's retries are duplicates")
			assert.Greater(t, biggest, 1, "entries came in batches")
			assert.LessOrEqual(t, biggest, cfg.Batch)
		})
	}
}

// A consumer that died with a batch taken and its keys claimed leaves the
// entries pending and the keys in flight: another consumer claims the
// entries again once idle, finds the keys in flight and leaves them pending,
// and processes them once their lease ran out. None is lost, none runs twice.
func TestDeadConsumer(t *testing.T) {
	opt, err := redis.ParseURL(redisURL(t))
	require.NoError(t, err)
	client := redis.NewClient(opt)
	defer client.Close()
	stream := fmt.Sprintf("{batchconsumer-test-%d}:orders", time.Now().UnixNano())
	defer client.Del(context.Background(), stream, stream+":dead")
	ctx := context.Background()
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer store.Close()
	d := dedupe.New(store)
	defer d.Close()
	var mu sync.Mutex
	runs := map[string]int{}
	newConsumer := func(name string) *Consumer {
		return &Consumer{Client: client, Stream: stream, Group: "g", Name: name, Deduper: d, Channel: "orders",
			Batch: 16, Block: 50 * time.Millisecond, Retry: 100 * time.Millisecond,
			Handle: func(_ context.Context, m Message) error {
				mu.Lock()
				defer mu.Unlock()
				runs[m.ID]++
				return nil
			}}
	}
	dead, alive := newConsumer("dead"), newConsumer("alive")
	require.NoError(t, dead.CreateGroup(ctx))
	const n = 10
	for i := range n {
		require.NoError(t, client.XAdd(ctx, &redis.XAddArgs{Stream: stream, Values: map[string]any{"id": fmt.Sprint("o-", i)}}).Err())
	}

	// The dead consumer took every entry and claimed each key for 2 s,
	// then died: no ack, no release.
	entries, _, err := dead.take(ctx)
	require.NoError(t, err)
	require.Len(t, entries, n)
	for _, e := range entries {
		st, err := store.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "orders", MessageID: e.Values["id"].(string)}), 2*time.Second)
		require.NoError(t, err)
		require.Equal(t, dedupe.Claimed, st)
	}

	var inFlight int
	deadline := time.Now().Add(20 * time.Second)
	for alive.pending(ctx) != 0 {
		require.True(t, time.Now().Before(deadline), "entries still pending")
		o, err := alive.Step(ctx)
		require.NoError(t, err)
		inFlight += o.InFlight
	}
	assert.Positive(t, inFlight, "the dead consumer's keys were found in flight first")
	require.Len(t, runs, n)
	for id, r := range runs {
		assert.Equal(t, 1, r, "runs of %s", id)
	}
}
