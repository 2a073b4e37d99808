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
