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
// missing, and checks an existing table, altering it only to upgrade an older
// schema version; to create them in a migration instead, run the statements of
// [MigrationSQL], and New then needs no CREATE privilege. The server's clock
// decides expiry, so the gateways' clocks never matter. Each Claim is one
// statement, and concurrent calls share one transaction (one commit) per
// batch. How it works (the schema, the claim statement, the fencing of
// released tokens, batching) is in docs/internals-postgres.md in the
// repository.
//
// # Batches
//
// The Store is a [dedupe.BatchStore]: [Store.ClaimEach], [Store.ExtendEach],
// [Store.ReleaseEach] and [Store.MarkEach] send a batch of keys as arrays in
// one statement (on the partitioned layout, after one statement taking the
// keys' locks), one round trip and one commit for up to 1,000 keys, with the
// outcomes of as many one-key calls, which [dedupe.Deduper.DoEach] uses. A
// batch holding a key twice is sent in several round trips, cut before the
// repeat, so that the items on one key are applied in their order.
//
// # Results
//
// [Store.MarkResult] keeps a result of up
// to [dedupe.MaxResultSize] bytes with the mark, in the row's result column,
// in the same statement as the mark, and [Store.Result] reads it back, so that
// [dedupe.Deduper.DoResult] gives the first run's result to the copies of a
// message on every instance. [Store.DoResultTx] keeps it in the caller's
// transaction with the mark and fn's effects.
//
// # Schema versions
//
// The table's comment records its version ([SchemaVersion]). New upgrades a
// table of an older version in place, keeping its marks and claims, in one
// transaction under the advisory lock that serialises instances starting
// together, and refuses a table of a newer version with an error naming both.
// A role that may not ALTER the table gets an error with the SQL to run; the
// documentation of [SchemaVersion] shows it. [MigrationSQL] gives the
// statements that create the table, for a migration.
//
// # Partitioned layout
//
// With [Config.Partitioned] the table is partitioned by ranges of expiry
// (PARTITION BY RANGE (expires_at)), each of [Config.PartitionSpan] (a day by
// default), and the cleanup detaches (CONCURRENTLY) and drops whole
// partitions once their range has passed on the server's clock, so that every
// row in them has expired: no DELETE of rows one by one, no dead rows for
// vacuum, and a cost independent of how many rows expired. Nothing in the
// table can make a key unique (a unique index of a partitioned table must
// hold the partition key), so each write of a key runs under an advisory lock
// of the key, and replaces the key's rows with one: a key has at most one
// row, in the partition of its expiry, including after a Mark, Claim or
// Extend moves it to another partition. A claim that finds its key marked or
// held takes no lock. Every lookup reads the key's index in each partition
// whose range has not passed: keep the TTL within a few spans (a 72 h TTL
// with 1-day partitions reads 4 or 5).
//
// The store creates the partitions ahead, up to the longer of TTL and lease
// plus a span, at New and at every cleanup, through a function it creates
// with the table, "<table>_add_partitions"(upto timestamptz); a write whose
// expiry has no partition yet (a TTL longer than that) creates the missing
// ones and runs again. Where the store's role may not create tables, have a
// role that may call the function regularly (New and the cleanup then skip
// the creation):
//
//	SELECT public.dedupe_keys_add_partitions(now() + interval '2 days');
//
// and drop the partitions whose range has passed, as the cleanup does:
//
//	ALTER TABLE public.dedupe_keys DETACH PARTITION public.dedupe_keys_p202612010000 CONCURRENTLY;
//	DROP TABLE public.dedupe_keys_p202612010000;
//
// Partitions are named by the UTC minute their range starts at. Dropping the
// table leaves the function; drop it too. The statements of the partitioned
// layout also assume READ COMMITTED.
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
