package deduperedis_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// A gateway process wires a Deduper to the Redis store that every instance
// shares, with a local fallback for Redis outages. It needs a Redis server, so
// it is compiled but not run by go test.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := deduperedis.New(client, deduperedis.Config{TTL: 24 * time.Hour, Lease: time.Minute})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	local := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer local.Close()
	d := dedupe.New(store, dedupe.WithFallback(local))

	ctx := context.Background()
	key := dedupe.Key{Channel: "telegram", MessageID: "123"}
	err = d.Do(ctx, key, func(ctx context.Context) error {
		fmt.Println("dispatching", key)
		return nil
	})
	switch {
	case errors.Is(err, dedupe.ErrDuplicate), errors.Is(err, dedupe.ErrInFlight):
		// Another delivery of the message was processed or is being processed:
		// acknowledge this one and drop it.
	case err != nil:
		// Dispatch or the store failed: answer with an error so the platform
		// retries the delivery.
		log.Print(err)
	}
}

// OpenURL suits a command-line flag such as -store redis://127.0.0.1:6379/0.
// The store owns its client and closes it.
func ExampleOpenURL() {
	store, err := deduperedis.OpenURL("redis://127.0.0.1:6379/0", deduperedis.Config{Prefix: "gateway:"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := store.Ping(ctx); err != nil {
		log.Fatalf("redis store: %v", err)
	}
	d := dedupe.New(store)
	_ = d
}

// Using the store directly: claim, process, then mark, or release on failure
// so that the platform's retry is processed. (A Deduper does this for you.)
func ExampleStore_Claim() {
	store, err := deduperedis.OpenURL("redis://127.0.0.1:6379/0", deduperedis.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	key := dedupe.Key{Channel: "slack", MessageID: "Ev0123"}
	c := dedupe.NewClaim(key)
	status, err := store.Claim(ctx, c, time.Minute)
	if err != nil {
		_ = store.Release(ctx, c) // the claim may have been taken all the same
		return
	}
	if status != dedupe.Claimed {
		return // a store error, a duplicate or a copy in flight elsewhere
	}
	if err := process(ctx, key); err != nil {
		_ = store.Release(ctx, c)
		return
	}
	if err := store.Mark(ctx, key, 0); err != nil {
		log.Print(err)
	}
}

func process(context.Context, dedupe.Key) error { return nil }

// On Redis Cluster, the client's options decide how soon a store recovers
// from a master's death: a dead node answers no MOVED, so the client learns
// the new owner of its slots only when its slot map is reloaded, which the
// store asks for at once when a call fails, and which go-redis does by itself
// every ClusterStateReloadInterval (60 s unless set). Short dial and read
// timeouts let a call on a dead or stalled node fail fast and be retried.
// Replicas makes every Mark and Claim wait for one replica's
// acknowledgement, so that a failover cannot lose it. It needs a cluster, so
// it is compiled but not run by go test.
func ExampleNew_cluster() {
	client := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		ContextTimeoutEnabled:      true,            // the callers' deadlines bound calls in flight
		ClusterStateReloadInterval: 5 * time.Second, // go-redis's default is 60 s
		DialTimeout:                time.Second,     // a dead host fails a call in 1 s, not 5 s
		ReadTimeout:                2 * time.Second, // above Config.ReplicaTimeout
		WriteTimeout:               2 * time.Second,
	})
	defer client.Close()
	store, err := deduperedis.New(client, deduperedis.Config{
		Lease:          time.Minute, // longer than the longest failover expected
		Replicas:       1,
		ReplicaTimeout: 500 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	d := dedupe.New(store)
	_ = d
}

// OpenURL and OpenClusterURL take the cluster URLs of go-redis: the nodes
// after addr=, client options as query parameters.
func ExampleOpenClusterURL() {
	store, err := deduperedis.OpenClusterURL("redis://10.0.0.1:6379?addr=10.0.0.2:6379&addr=10.0.0.3:6379&dial_timeout=1s", deduperedis.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
}

// The compact layout keeps each mark as an 8-byte fingerprint in small
// per-shard hashes, about a sixth of the plain layout's memory (docs/sizing.md).
// Shards is sized to the marks live at once divided by 64: here 100
// messages a second for 24 hours, 8.64 million marks. Every instance of the
// prefix must use the same Compact and Shards. It is compiled but not run by
// go test.
func ExampleNew_compact() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := deduperedis.New(client, deduperedis.Config{
		TTL:     24 * time.Hour,
		Compact: true,
		Shards:  8_640_000 / 64,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	d := dedupe.New(store, dedupe.WithFallback(dedupe.NewMemoryStore(dedupe.MemoryConfig{})))
	_ = d
}
