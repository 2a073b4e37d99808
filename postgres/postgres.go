package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/batch"
)

// Defaults of a [Config] whose fields are zero.
const (
	// DefaultTable is the table a [Store] uses when [Config.Table] is empty.
	DefaultTable = "dedupe_keys"
	// DefaultCleanupBatch is the number of rows [Store.CleanupExpired] deletes per
	// statement when [Config.CleanupBatch] is zero.
	DefaultCleanupBatch = 1000
)

// Config configures a [Store]. The zero value gives the defaults.
type Config struct {
	// Table is the table holding marks and claims, a plain name ("dedupe_keys")
	// or a schema-qualified one ("gateway.dedupe_keys"). Each part must start with
	// a letter or '_' and hold only ASCII letters, digits and '_'; the table part
	// is at most 48 bytes so that its index name fits PostgreSQL's 63. The name is
	// always quoted, so upper-case letters are kept. Default [DefaultTable].
	Table string
	// TTL is how long a mark lasts when [Store.Mark] is given ttl <= 0.
	// Default [dedupe.DefaultTTL] (24 h).
	TTL time.Duration
	// Lease is how long a claim lasts when [Store.Claim] or [Store.Extend] is
	// given lease <= 0. Default [dedupe.DefaultLease] (5 min).
	Lease time.Duration
	// CleanupInterval, when positive, starts a background goroutine that calls
	// [Store.CleanupExpired] at this interval until [Store.Close]. Zero or negative:
	// no goroutine; expired rows are then ignored by every method and stay in the
	// table until CleanupExpired is called or a later Mark or Claim of the same key
	// overwrites them. Default 0.
	CleanupInterval time.Duration
	// CleanupBatch is the number of rows one DELETE of [Store.CleanupExpired]
	// removes at most, bounding how long it holds row locks. Unused on the
	// partitioned layout, whose cleanup drops partitions. Default
	// [DefaultCleanupBatch].
	CleanupBatch int
	// Partitioned, when true, keeps marks and claims in a table partitioned by
	// ranges of expiry (PARTITION BY RANGE (expires_at)), of PartitionSpan
	// each, which the store creates ahead, and which [Store.CleanupExpired]
	// detaches and drops once every row in them has expired, instead of
	// deleting rows one by one. New refuses a table whose layout is not the
	// one asked for. See "Partitioned layout" in the package documentation.
	// Default false: a plain table.
	Partitioned bool
	// PartitionSpan is the range of expiry times that one partition holds, a
	// whole number of minutes; partitions start at whole multiples of it
	// since the Unix epoch (a day: at midnight UTC). A table records the span
	// it was made with, and New refuses another. Used only with Partitioned.
	// Default [DefaultPartitionSpan] (24 h).
	PartitionSpan time.Duration
	// ReadOnly opens an existing table for reading only, as a tool
	// inspecting it does: nothing is created, upgraded or partitioned ahead,
	// the layout is the table's own (Partitioned and PartitionSpan are read
	// from it), a table that does not exist is an error naming it, and every
	// write returns [dedupe.ErrReadOnly]. [Open] also makes every transaction
	// of its pool read-only. CleanupInterval must be 0. Default false.
	ReadOnly bool
	// AdoptLayout opens an existing table in the layout it has, plain or
	// partitioned with the span its comment records, whatever Partitioned
	// and PartitionSpan say; a missing table is created as they ask. Default
	// false: a table of the other layout is refused.
	AdoptLayout bool
	// Logger receives the errors of the background cleanup, which has no caller to
	// return them to, at warn level, and at debug level a record of each sweep
	// of the cleanup, of each claim statement run again after it met a
	// concurrent commit, and of each batch whose calls were sent again one by
	// one after a statement failed. Default [slog.Default].
	Logger *slog.Logger
}

// Store is a [dedupe.Store] kept in a PostgreSQL table, so that every gateway
// instance connected to the same database sees the same marks and claims. It
// is safe for concurrent use by any number of goroutines and processes.
//
// Expiry is decided by the server's clock (now() in each statement), never the
// client's: instances whose clocks disagree still agree on what has expired.
// Expired rows are absent to every method even before they are deleted.
//
// Exists, Mark, Claim, Extend and Release are each one statement (on the
// partitioned layout a write is preceded by its key's lock statement, in the
// same batch; see "Partitioned layout" in the package documentation). A Store
// batches them (docs/internals-postgres.md, "Batching"): the calls that arrive
// while a batch is in flight are sent together in the next one, up to 128, in
// one round trip and one transaction; a call that finds nothing in flight is
// sent at once. Each call waits for the commit of its own batch and gets its
// own result; a statement that fails does not fail the other calls of its
// batch. A Claim takes a second statement only when it races with a concurrent
// writer of the same key; see docs/internals-postgres.md, "Claims".
//
// The Store does not own a pool given to [New]: [Store.Close] leaves it open.
// A Store made by [Open] owns its pool and closes it.
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool
	table   string // quoted, for messages and SQL
	ttl     time.Duration
	lease   time.Duration
	batch   int
	log     *slog.Logger
	sql     statements
	each    eachStatements // of the batch calls (each.go)
	part    *partitions    // nil for the plain layout
	ro      bool           // Config.ReadOnly
	b       batch.Batcher[*pgBatch]

	closed    atomic.Bool
	closeOnce sync.Once
	stop      context.CancelFunc // stops the sweeper; nil without one
	done      chan struct{}      // closed when the sweeper has returned
}

// statements are the SQL texts of a Store, built once for its table.
type statements struct {
	exists, mark, claim, extend, release, cleanup string
	markTx, held, result, keepResult, forget      string
	// lock, on the partitioned layout, takes the key's advisory lock for the
	// transaction, ahead of each statement that writes the key; "" on the
	// plain table, whose unique index on key serialises the writers.
	// claimLock is lock for a claim, which it skips when the key is held.
	lock, claimLock string
}

// after is the SQL of a time a duration after the server's now. Durations
// travel as whole microseconds ($n::bigint), the resolution of timestamptz, so
// no interval encoding is involved.
const after = `now() + %s::bigint * interval '1 microsecond'`

func buildStatements(t string) statements {
	return statements{
		exists: `SELECT EXISTS (SELECT 1 FROM ` + t + ` WHERE key = $1 AND token IS NULL AND expires_at > now())`,

		mark: `INSERT INTO ` + t + ` AS d (key, token, expires_at, result) VALUES ($1, NULL, ` + fmt.Sprintf(after, "$2") + `, $3)
ON CONFLICT (key) DO UPDATE SET token = NULL, expires_at = excluded.expires_at, result = excluded.result`,

		claim: claimSQL(t),

		extend: `UPDATE ` + t + ` SET expires_at = ` + fmt.Sprintf(after, "$3") + `
WHERE key = $1 AND split_part(token, ' ', 1) = $2 AND expires_at > now()`,

		release: releaseSQL(t),

		markTx:     markTxSQL(t),
		held:       heldSQL(t),
		result:     resultSQL(t),
		keepResult: keepResultSQL(t),
		forget:     forgetSQL(t),

		// The subquery takes up to a batch of expired rows from the expiry index
		// and locks them, rechecking expiry on a row updated meanwhile; the locked
		// rows cannot change before the DELETE, which finds them by key. As an
		// array (not "key IN (…)", which the planner may turn into a hash join
		// over the whole table) the keys always go through the key's index.
		cleanup: `DELETE FROM ` + t + ` WHERE key = ANY (ARRAY(
	SELECT key FROM ` + t + ` WHERE expires_at <= now()
	ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED))`,
	}
}

// claimSQL returns the claim statement on table t.
//
// cur reads the live row, if any, in the statement's snapshot, unless it
// is the caller's own claim (a repeated Claim, which renews it) or holds
// only the fences of other tokens (a released key, absent to this one).
// When there is one the insert is skipped: the outcome is Duplicate or
// InFlight (also for a fenced token) and nothing is written or locked.
// Otherwise the insert takes the key, over an expired row or the fences,
// which it keeps. Its arbiter is the unique index on key, checked against
// the latest committed row, not the snapshot, and the WHERE is evaluated
// on that row under its lock: of racing claims exactly one inserts or
// updates, and the others return no row.
func claimSQL(t string) string {
	return `WITH cur AS (
	SELECT token IS NULL AS marked FROM ` + t + `
	WHERE key = $1::text AND expires_at > now() AND ` + heldBy("$2::text") + `
), ins AS (
	INSERT INTO ` + t + ` AS d (key, token, expires_at)
	SELECT $1::text, $2::text, ` + fmt.Sprintf(after, "$3") + `
	WHERE NOT EXISTS (SELECT 1 FROM cur)
	` + claimConflict + `
	RETURNING 1
)
SELECT 1 FROM ins
UNION ALL
SELECT CASE WHEN marked THEN 2 ELSE 3 END FROM cur`
}

// heldBy is the condition on a live row (its token column) that makes a
// claim with token tok an outcome without a write: a mark, a claim of
// another token, or a fence on tok. Claims of every layout and batch share
// it.
func heldBy(tok string) string {
	return `(token IS NULL
		OR split_part(token, ' ', 1) NOT IN ('', ` + tok + `)
		OR strpos(token || ' ', ' ' || ` + tok + ` || ' ') > 0)`
}

// claimConflict is the upsert of a claim on the plain table, after its
// INSERT: the claim (excluded) takes an expired row, renews the caller's
// own claim, or takes a row of fences not on its token, keeping them.
const claimConflict = `ON CONFLICT (key) DO UPDATE SET
		token = CASE WHEN d.expires_at <= now() THEN excluded.token
			WHEN left(d.token, 1) = ' ' THEN excluded.token || d.token
			ELSE d.token END,
		expires_at = excluded.expires_at, result = NULL
	WHERE d.expires_at <= now()
		OR split_part(d.token, ' ', 1) IN ('', excluded.token)
		AND strpos(d.token || ' ', ' ' || excluded.token || ' ') = 0`

// releaseSQL returns the release statement on table t.
//
// release drops the caller's claim and fences its token, in one upsert
// of the key's row: the row is locked, and a Claim with the token that
// commits first is fenced too. The token joins the row's fences (the
// last eight are kept): in place of the caller's claim, an expired row
// or an absent one, with the store's lease; beside another token's live
// claim, whose expiry is kept. A mark is left alone. old says whether
// the caller held the key when the statement began.
func releaseSQL(t string) string {
	return `WITH old AS (
	SELECT 1 FROM ` + t + ` WHERE key = $1::text AND expires_at > now() AND split_part(token, ' ', 1) = $2::text
), up AS (
	INSERT INTO ` + t + ` AS d (key, token, expires_at)
	VALUES ($1::text, ' ' || $2::text, ` + fmt.Sprintf(after, "$3") + `)
	` + releaseConflict("$2::text") + `
)
SELECT count(*)::int FROM old`
}

// releaseConflict is the upsert of a release of token tok on the plain
// table, after its INSERT of the fence (excluded): see releaseSQL.
func releaseConflict(tok string) string {
	return `ON CONFLICT (key) DO UPDATE SET
		token = CASE WHEN d.expires_at <= now() THEN excluded.token ELSE
			` + keptFences("d.token", tok) + `
			|| excluded.token END,
		expires_at = CASE WHEN d.expires_at > now() AND split_part(d.token, ' ', 1) NOT IN ('', ` + tok + `)
			THEN d.expires_at ELSE excluded.expires_at END,
		result = NULL
	WHERE d.token IS NOT NULL OR d.expires_at <= now()`
}

// keptFences is what a release of token tok keeps of a row's token column
// token: the claim unless it is tok's, and the last seven fences other
// than tok, to which the release appends tok's.
func keptFences(token, tok string) string {
	return `CASE WHEN split_part(` + token + `, ' ', 1) IN ('', ` + tok + `) THEN '' ELSE split_part(` + token + `, ' ', 1) END
			|| regexp_replace(rtrim(replace(substr(` + token + `, length(split_part(` + token + `, ' ', 1)) + 1) || ' ',
				' ' || ` + tok + ` || ' ', ' ')), '^.*(( [^ ]+){7})$', '\1')`
}

// Messages of the debug records of a Store's Logger.
const (
	msgSweep      = "dedupe: postgres: cleanup swept"
	msgClaimAgain = "dedupe: postgres: claim met a concurrent commit; running it again"
	msgOneByOne   = "dedupe: postgres: a statement failed and its batch rolled back; sending the calls one by one"
)

// Outcomes of the claim statement.
const (
	claimInserted  = 1
	claimMarked    = 2
	claimHeld      = 3
	maxClaimTrials = 16
)

// New returns a store on pool, creating its table and expiry index if they are
// missing, and checking that an existing table has the columns the store
// needs. Several instances may call New on the same table at once: creation is
// serialised by an advisory lock.
//
// The caller keeps ownership of pool and must close it after [Store.Close].
// If cfg.CleanupInterval is positive, New starts the background cleanup, which
// Close stops.
func New(ctx context.Context, pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, errors.New("dedupe: postgres: nil pool")
	}
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	ident, err := parseTable(cfg.Table)
	if err != nil {
		return nil, err
	}
	cfg.TTL = orDefault(cfg.TTL, dedupe.DefaultTTL)
	cfg.Lease = orDefault(cfg.Lease, dedupe.DefaultLease)
	if cfg.CleanupBatch <= 0 {
		cfg.CleanupBatch = DefaultCleanupBatch
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReadOnly && cfg.CleanupInterval > 0 {
		return nil, errors.New("dedupe: postgres: a ReadOnly store cannot have a CleanupInterval")
	}
	if cfg.ReadOnly || cfg.AdoptLayout {
		if err := readLayout(ctx, pool, ident, &cfg); err != nil {
			return nil, err
		}
	}
	var part *partitions
	if cfg.Partitioned {
		if part, err = newPartitions(ident, cfg.PartitionSpan, cfg.TTL, cfg.Lease); err != nil {
			return nil, err
		}
	}
	if err := ensureSchema(ctx, pool, ident, part, cfg.ReadOnly); err != nil {
		return nil, err
	}
	t := ident.Sanitize()
	s := &Store{
		pool:  pool,
		table: t,
		ttl:   cfg.TTL,
		lease: cfg.Lease,
		batch: cfg.CleanupBatch,
		log:   cfg.Logger,
		sql:   buildStatements(t),
		each:  buildEach(t),
		part:  part,
		ro:    cfg.ReadOnly,
	}
	if part != nil {
		s.sql, s.each = part.statements(t), part.partEach(t)
	}
	s.b.Send, s.b.Rounds, s.b.Closed = s.send, roundsInFlight, dedupe.ErrClosed
	if cfg.CleanupInterval > 0 {
		sweepCtx, stop := context.WithCancel(context.Background())
		s.stop = stop
		s.done = make(chan struct{})
		go s.sweep(sweepCtx, cfg.CleanupInterval)
	}
	return s, nil
}

// Open connects to the database at dsn, a URL such as
// "postgres://user@host:5432/db?sslmode=disable" or a key=value string (see
// [pgxpool.ParseConfig] for the pool settings it accepts, such as
// pool_max_conns), and returns a store on it as [New] does. A URL may also
// set the store's options, which override cfg's and are not sent to the
// server: table=, partitioned= and partition_span=
// ("postgres://host/db?table=gateway.dedupe_keys&partitioned=true"), the
// grammar of the dedupe command's URLs, which docs/urls.md describes. The store owns the
// pool: [Store.Close] closes it.
func Open(ctx context.Context, dsn string, cfg Config) (*Store, error) {
	dsn, err := takeURLOptions(dsn, &cfg)
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("dedupe: postgres: open: %w", err)
	}
	if cfg.ReadOnly {
		pcfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("dedupe: postgres: open: %w", err)
	}
	s, err := New(ctx, pool, cfg)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// Exists reports whether key is marked and its TTL has not passed on the
// server's clock. A claim does not exist.
func (s *Store) Exists(ctx context.Context, key dedupe.Key) (bool, error) {
	if err := s.check(ctx, "exists", key); err != nil {
		return false, err
	}
	k := key.String()
	var ok bool
	err := s.b.Do(ctx, k, func(p *pgBatch) func() error {
		p.Queue(s.sql.exists, k)
		return func() error { return p.results.QueryRow().Scan(&ok) }
	})
	if err != nil {
		return false, s.fail(ctx, "exists", key, err)
	}
	return ok, nil
}

// Mark records key as processed for ttl (ttl <= 0: [Config.TTL]) from the
// server's now, replacing any mark or claim on it. When Mark returns an error
// the mark may or may not have been written (the connection can fail after the
// commit); marking again is harmless.
func (s *Store) Mark(ctx context.Context, key dedupe.Key, ttl time.Duration) error {
	if err := s.check(ctx, "mark", key); err != nil {
		return err
	}
	return s.mark(ctx, key, nil, ttl)
}

// Claim takes c.Key for c.Token, for lease (lease <= 0: [Config.Lease]),
// unless a live mark ([dedupe.Duplicate]) or a live claim with another token
// ([dedupe.InFlight]) holds it; see [dedupe.Store.Claim]. A Claim that returns
// an error may have committed all the same: Claim again with the same c, or
// Release(c), to settle it; [dedupe.Deduper] does.
func (s *Store) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	key := c.Key
	if err := s.check(ctx, "claim", key); err != nil {
		return 0, err
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	if lease <= 0 {
		lease = s.lease
	}
	k, token, us := key.String(), c.Token, micros(lease)
	for range maxClaimTrials {
		var outcome int
		err := s.do(ctx, k, lease, lockOf(s.sql.claimLock, k, token), func(p *pgBatch) func() error {
			p.Queue(s.sql.claim, k, token, us)
			return func() error {
				if err := p.results.QueryRow().Scan(&outcome); !isNoRows(err) {
					return err
				}
				outcome = 0
				return nil
			}
		})
		switch {
		case err != nil:
			return 0, s.fail(ctx, "claim", key, err)
		case outcome == claimInserted:
			return dedupe.Claimed, nil
		case outcome == claimMarked:
			return dedupe.Duplicate, nil
		case outcome == claimHeld:
			return dedupe.InFlight, nil
		case outcome != 0:
			return 0, fmt.Errorf("dedupe: postgres: claim %s: unexpected outcome %d", key, outcome)
		}
		// No row: the insert met a live row committed after the statement's
		// snapshot was taken. A new statement has a new snapshot that sees it,
		// or, if it is gone again, takes the key.
		s.log.Debug(msgClaimAgain, "table", s.table, "key", k)
		if err := ctx.Err(); err != nil {
			return 0, s.fail(ctx, "claim", key, err)
		}
	}
	return 0, fmt.Errorf("dedupe: postgres: claim %s: no stable outcome after %d attempts under concurrent writes", key, maxClaimTrials)
}

// Extend renews c's lease to lease from the server's now (lease <= 0:
// [Config.Lease]) if c still holds its key, and otherwise returns
// [dedupe.ErrNotOwner].
func (s *Store) Extend(ctx context.Context, c dedupe.Claim, lease time.Duration) error {
	if err := s.checkClaim(ctx, "extend", c); err != nil {
		return err
	}
	if lease <= 0 {
		lease = s.lease
	}
	n, err := s.write(ctx, lease, c.Key.String(), s.sql.extend, c.Token, micros(lease))
	if err != nil {
		return s.fail(ctx, "extend", c.Key, err)
	}
	if n == 0 {
		return fmt.Errorf("dedupe: postgres: extend %s: %w", c.Key, dedupe.ErrNotOwner)
	}
	return nil
}

// Release drops c's claim if c still holds its key, and otherwise returns
// [dedupe.ErrNotOwner]. Either way it fences c's token for the store's lease:
// a Claim with it that reaches the server later (sent before the Release, on
// a connection that was given up) takes nothing, so it strands nothing.
func (s *Store) Release(ctx context.Context, c dedupe.Claim) error {
	if err := s.checkClaim(ctx, "release", c); err != nil {
		return err
	}
	k, token, us := c.Key.String(), c.Token, micros(s.lease)
	var held int
	err := s.do(ctx, k, s.lease, lockOf(s.sql.lock, k), func(p *pgBatch) func() error {
		p.Queue(s.sql.release, k, token, us)
		return func() error { return p.results.QueryRow().Scan(&held) }
	})
	if err != nil {
		return s.fail(ctx, "release", c.Key, err)
	}
	if held == 0 {
		return fmt.Errorf("dedupe: postgres: release %s: %w", c.Key, dedupe.ErrNotOwner)
	}
	return nil
}

// write runs the statement sql on key k with the further arguments args in
// the next batch, and returns the number of rows it affected. d is the
// longest time from now that the statement may set an expiry to (see
// [Store.do]).
func (s *Store) write(ctx context.Context, d time.Duration, k, sql string, args ...any) (int64, error) {
	var n int64
	err := s.do(ctx, k, d, lockOf(s.sql.lock, k), func(p *pgBatch) func() error {
		p.Queue(sql, append([]any{k}, args...)...)
		return func() error {
			tag, err := p.results.Exec()
			n = tag.RowsAffected()
			return err
		}
	})
	if err != nil {
		return 0, err // n is not ours to read: a call given up may be answered later
	}
	return n, nil
}

// lockStmt is a statement taking a key's lock, with its arguments.
type lockStmt struct {
	sql  string
	args []any
}

// lockOf returns the statement sql with args; sql "" (the plain layout)
// takes no lock.
func lockOf(sql string, args ...any) lockStmt { return lockStmt{sql, args} }

// do runs a call that writes key k, queued by queue, in the next batch. On
// the partitioned layout the call first runs the statement lock, which takes
// k's lock, and if the expiry it writes, at most d from now, has no
// partition yet, do creates the partitions up to d ahead and runs the call
// again, once.
func (s *Store) do(ctx context.Context, k string, d time.Duration, lock lockStmt, queue func(p *pgBatch) func() error) error {
	call := queue
	if lock.sql != "" {
		call = func(p *pgBatch) func() error {
			p.Queue(lock.sql, lock.args...)
			read := queue(p)
			return func() error {
				if _, err := p.results.Exec(); err != nil {
					return err
				}
				return read()
			}
		}
	}
	err := s.b.Do(ctx, k, call)
	if s.part == nil || !noPartition(err) {
		return err
	}
	if err := s.part.add(ctx, s.pool, d); err != nil {
		return err
	}
	return s.b.Do(ctx, k, call)
}

// Backend returns "postgres".
func (s *Store) Backend() string { return "postgres" }

// Close stops the background cleanup, if any, and waits for it to return;
// later calls of every method return [dedupe.ErrClosed], and so do the calls
// still queued for a batch. It waits for the batch in flight to be answered. A
// pool given to [New] is left open for its owner to close; the pool of a store
// made by [Open] is closed, after the calls using it return. Close is
// idempotent and always returns nil.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.b.Close()
		if s.stop != nil {
			s.stop()
			<-s.done
		}
		if s.ownPool {
			s.pool.Close()
		}
	})
	return nil
}

// check returns the error a call with key must fail with before any I/O.
func (s *Store) check(ctx context.Context, op string, key dedupe.Key) error {
	if s.closed.Load() {
		return dedupe.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("dedupe: postgres: %s %s: %w", op, key, err)
	}
	if s.ro && op != "exists" && op != "result" {
		return fmt.Errorf("dedupe: postgres: %s %s: %w", op, key, dedupe.ErrReadOnly)
	}
	return key.Validate()
}

// checkClaim is check for Extend and Release, which also refuse, without a
// round trip, a claim this store cannot have made.
func (s *Store) checkClaim(ctx context.Context, op string, c dedupe.Claim) error {
	if err := s.check(ctx, op, c.Key); err != nil {
		return err
	}
	if c.Validate() != nil {
		return fmt.Errorf("dedupe: postgres: %s %s: %w: not a claim token", op, c.Key, dedupe.ErrNotOwner)
	}
	return nil
}

// fail wraps a database error. If ctx ended meanwhile, the result also wraps
// ctx.Err(), whatever error the driver saw first.
func (s *Store) fail(ctx context.Context, op string, key dedupe.Key, err error) error {
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("dedupe: postgres: %s %s: %w: %w", op, key, cerr, err)
	}
	return fmt.Errorf("dedupe: postgres: %s %s: %w", op, key, err)
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// micros returns d in whole microseconds, rounded up so that a positive
// duration never becomes zero.
func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if d%time.Microsecond != 0 {
		us++
	}
	return us
}
