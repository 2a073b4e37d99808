// Package postgres is a [dedupe.Store] kept in a PostgreSQL table, shared by
// every gateway instance connected to the same database. It suits the long
// business window (72 h and more) and deployments that already run
// PostgreSQL. It also holds [Queue], a durable work queue in a table for the
// Async of package dedupehttp. It is a nested module, so users of the root
// package do not download its driver, github.com/jackc/pgx/v5.
//
// # Usage
//
// Give a pgx pool to [New], with a cleanup interval, and the store to
// [dedupe.New]. ExampleNew, in example_test.go, is this program, compiled by
// go test:
//
//	pool, err := pgxpool.New(ctx, "postgres://gateway@db:5432/app")
//	if err != nil {
//		return err
//	}
//	defer pool.Close()
//	store, err := postgres.New(ctx, pool, postgres.Config{
//		TTL:             72 * time.Hour,
//		CleanupInterval: time.Minute,
//	})
//	if err != nil {
//		return err
//	}
//	defer store.Close()
//	d := dedupe.New(store)
//	err = d.Do(ctx, key, dispatch)
//
// [Open] does the same from a DSN and owns the pool it makes. [NewQueue]
// opens the queue.
//
// [New] creates its table (default "dedupe_keys") and an index if they are
// missing, and checks an existing table without altering it; to create them in
// a migration instead, take the statements from docs/internals-postgres.md, and
// New then needs no CREATE privilege. The server's clock decides expiry, so the
// gateways' clocks never matter. Each Claim is one statement, and concurrent
// calls share one transaction (one commit) per batch. How it works (the schema,
// the claim statement, the fencing of released tokens, batching) is in
// docs/internals-postgres.md in the repository.
//
// # Cleanup
//
// Expired rows are ignored by every method but stay in the table until
// [Store.CleanupExpired] deletes them, in bounded batches. Set
// [Config.CleanupInterval] to have the store call it in the background, in a
// goroutine that [Store.Close] stops and waits for. Apart from it, the store
// runs a goroutine only while calls wait for a batch.
//
// # Errors and cancellation
//
// Errors wrap [dedupe.ErrInvalidKey] (checked before any I/O),
// [dedupe.ErrNotOwner], [dedupe.ErrClosed] and the context's error, and are
// prefixed "dedupe: postgres:". A Mark or Claim that returns an error, a
// connection failure or a cancelled context for instance, may still have been
// committed by the server: a mark is then there (marking again is harmless),
// and a claim holds its key until its caller claims again with the same token
// or releases it, as [dedupe.Deduper] does; a retry with another token sees
// [dedupe.InFlight] until then, never a false [dedupe.Duplicate]. The pool
// replaces broken connections, so the same Store keeps working after a
// connection is lost or the server restarts.
//
// pgx has no read timeout of its own: give contexts deadlines (as
// [dedupe.Deduper] does for its marks and releases, and
// [dedupe.WithStoreTimeout] for every call), so that a connection that
// stopped answering holds up a call only until its deadline. The statements
// assume READ COMMITTED, PostgreSQL's default isolation level.
//
// A [Store] is safe for concurrent use.
package postgres
