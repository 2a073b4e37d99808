package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/postgres"
)

// The examples need a PostgreSQL server, so they are compiled but not run.

// A gateway shares one table between all its instances and dispatches each
// message once.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://gateway@127.0.0.1:5432/app?sslmode=disable")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close() // after the store's Close: the store does not own the pool

	store, err := postgres.New(ctx, pool, postgres.Config{
		TTL:             72 * time.Hour, // the business window
		CleanupInterval: time.Minute,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	d := dedupe.New(store)
	key := dedupe.Key{Channel: "telegram", MessageID: "123"}
	err = d.Do(ctx, key, func(ctx context.Context) error {
		fmt.Println("dispatching", key)
		return nil
	})
	switch {
	case errors.Is(err, dedupe.ErrDuplicate), errors.Is(err, dedupe.ErrInFlight):
		// Acknowledge the delivery: another copy was or is being processed.
	case err != nil:
		log.Print(err) // let the platform retry
	}
}

// Open makes a store from a DSN, as a -store flag would give it, and closes its
// pool on Close.
func ExampleOpen() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, "postgres://gateway@127.0.0.1:5432/app?sslmode=disable&pool_max_conns=8",
		postgres.Config{Table: "gateway.dedupe_keys"})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	ok, err := store.Exists(ctx, dedupe.Key{Channel: "slack", MessageID: "Ev0123"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("processed before:", ok)
}

// Without a background sweeper, a cron job or one chosen instance deletes
// expired rows itself.
func ExampleStore_CleanupExpired() {
	ctx := context.Background()
	store, err := postgres.Open(ctx, "postgres://gateway@127.0.0.1:5432/app", postgres.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	n, err := store.CleanupExpired(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted", n, "expired rows")
}
