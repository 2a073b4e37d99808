// Package postgres is a [dedupe.Store] kept in a PostgreSQL table, shared by
// every gateway instance connected to the same database. It suits the long
// business window (72 h and more) and deployments that already run
// PostgreSQL; it is a nested module, so users of the root package do not
// download its driver, github.com/jackc/pgx/v5.
//
// # Usage
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
// [Open] does the same from a DSN and owns the pool it makes.
//
// # Schema
//
// [New] creates the table (default "dedupe_keys") and an index on its expiry if
// they are missing:
//
//	CREATE TABLE dedupe_keys (
//		key        text COLLATE "C" PRIMARY KEY, -- "telegram:123"
//		token      text,                         -- NULL for a mark, the token of a claim
//		expires_at timestamptz NOT NULL
//	);
//	CREATE INDEX dedupe_keys_expires_at_idx ON dedupe_keys (expires_at);
//
// A row is live while expires_at > now(). An existing table is checked, not
// altered: New fails with a clear error if its columns do not fit. To create
// the table in a migration instead, use the statements above; New then needs
// no CREATE privilege.
//
// # Time
//
// The server's clock decides expiry: every statement compares expires_at with
// the server's now() and computes new expiries from it, so the clocks of the
// gateway machines never matter, and skew between them cannot make a mark
// expire early or a lease last too long. TTLs and leases are stored with
// microsecond resolution.
//
// # Claims
//
// [Store.Claim] is one statement. In outline:
//
//	WITH cur AS (SELECT token IS NULL AS marked FROM t
//	             WHERE key = $1 AND expires_at > now() AND <held by a mark, another claim, or a fence on $2>),
//	ins AS (INSERT INTO t AS d SELECT $1, $2, now() + $3
//	        WHERE NOT EXISTS (SELECT 1 FROM cur)
//	        ON CONFLICT (key) DO UPDATE SET token = <$2, keeping the fences>, expires_at = excluded.expires_at
//	        WHERE <d expired, d is the caller's own claim, or d holds only fences not on $2>
//	        RETURNING 1)
//	SELECT 1 FROM ins UNION ALL SELECT CASE WHEN marked THEN 2 ELSE 3 END FROM cur
//
// A live row in the statement's snapshot gives [dedupe.Duplicate] (a mark) or
// [dedupe.InFlight] (a claim) without writing or locking anything, which keeps
// duplicate deliveries cheap; the outcome is the key's state when the
// statement started, as for any read under READ COMMITTED. Otherwise the INSERT … ON CONFLICT takes the key,
// over an expired row if there is one. Exclusivity rests on the primary key:
// PostgreSQL checks the conflict against the latest committed row, waiting for
// a concurrent writer to finish, and evaluates the WHERE on that row while
// holding its lock, so of any number of racing claims exactly one inserts or
// updates. Under READ COMMITTED the snapshot of cur may predate a row that a
// concurrent claim or mark committed meanwhile; the statement then returns no
// row, and Claim runs it again with a fresh snapshot (a second round trip, only
// in such a race), which classifies that row or, if it has gone, takes the key.
// A Claim that keeps losing such races, 16 times in a row, returns an error
// rather than loop. The statements assume READ COMMITTED, PostgreSQL's default
// isolation level: with REPEATABLE READ or SERIALIZABLE as the connections'
// default, a Claim that races with another writer of its key fails with a
// serialization error instead (never a wrong outcome).
//
// Extend is one UPDATE matching the key, the token and expires_at > now(); no
// row matched gives [dedupe.ErrNotOwner]. Mark is one upsert that sets token
// to NULL, so it clears any claim.
//
// # Released tokens are fenced
//
// A Claim sent on a connection that was then given up (its caller's deadline
// passed, its reply was lost) may still be run by the server, and it may run
// after the Release that [dedupe.Deduper] sends on another connection to undo
// it. Taking the key then would strand the message for a lease. So
// [Store.Release] is one upsert of the key's row that drops the caller's
// claim and fences its token: the token column keeps the released tokens
// after the claim's own, space-separated (" T1 T2" once nobody holds the key,
// "T3 T1 T2" while another claim does; tokens hold no spaces), and a Claim
// with a fenced token takes nothing and is answered [dedupe.InFlight]. The
// upsert locks the row, so a racing Claim with the token is either fenced by
// it or, having committed first, dropped by it. Any other token takes a
// released key at once, and Exists ignores it. Fences last as long as the
// row: the store's lease ([Config.Lease]) after the release, or the remaining
// lease of the claim they sit in; the last eight released tokens of a key are
// kept. A store of an earlier version reads a released row as a claim held by
// someone else, until it expires: upgrade every instance before relying on
// releases of the new one.
//
// # Batching
//
// A [Store] sends the statements of concurrent calls together (natural
// batching, or group commit): a call that finds a batch free is sent at once,
// by its own goroutine, with no timer; the calls that arrive while four batches
// are in flight wait, and the next batch sends them all, up to 128. A batch is
// one pgx.Batch on one connection of the pool: one round trip, and one
// transaction, since pgx sends it with a single Sync, so one commit (one WAL
// flush) serves all its calls. So a lone caller waits one round trip and one
// commit, as without batching, and 64 concurrent callers share a few commits
// instead of making 64. The statements are prepared once per connection by
// pgx's statement cache (the default QueryExecModeCacheStatement); the other
// exec modes work too.
//
// Each call waits for the commit of its batch and gets its own result and
// error. A batch runs its statements in the order of their keys, so that
// batches running at once (on several connections, or in other instances) take
// their row locks in one order and do not deadlock; calls on one key keep
// their order, and each statement sees the ones before it in the batch, so two
// Claims of one key in a batch give one [dedupe.Claimed] and one
// [dedupe.InFlight], as in two batches. If a statement fails (a serialization
// failure, a constraint of a migrated table, a statement timeout), the server
// rolls the whole batch back and nothing of it is written; the store then
// sends its calls again one by one, each in a transaction of its own, so that
// the failing call alone fails. If the connection fails, or the batch's
// context ends, every call of the batch gets the error; the commit may have
// happened (see Errors and cancellation).
//
// A call whose context ends while it waits for a batch returns the context's
// error at once and is never sent; one whose context ends while its batch is
// in flight returns the context's error too, and its statement may still
// commit. A batch is cancelled when the last of its callers gives up, and
// bounded by the latest of their deadlines; pgx has no read timeout of its
// own, so a batch with a caller whose context has no deadline waits on a
// connection that stopped answering until the connection fails. Give contexts
// deadlines (as [dedupe.Deduper] does for its marks and releases): a stuck
// connection then holds up one of the four batches, and only until then.
// [Store.Close] answers the calls still waiting with [dedupe.ErrClosed] and
// waits for the batches in flight.
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
package postgres
