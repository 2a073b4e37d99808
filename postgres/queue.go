package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultQueueTable is the table a [Queue] uses when [QueueConfig.Table] is
// empty.
const DefaultQueueTable = "dedupe_queue"

// QueueConfig configures a [Queue]. The zero value gives the defaults.
type QueueConfig struct {
	// Table is the queue's table, named as [Config.Table] is; give each
	// Async of dedupehttp (each handler) a table of its own. Default
	// [DefaultQueueTable].
	Table string
	// Visibility is how long a take hides a message. Default
	// [queue.DefaultVisibility].
	Visibility time.Duration
	// Retention is how long the state of a done or failed message is kept;
	// Take deletes older rows, at most once a minute and 1000 at a time.
	// Default [queue.DefaultRetention].
	Retention time.Duration
	// PollInterval is how often Take looks for a message pushed by another
	// process, or whose visibility timeout ran out. Default
	// [queue.DefaultPollInterval].
	PollInterval time.Duration
	// MaxDepth bounds the live (queued or processing) rows: Push refuses
	// more with [queue.ErrFull]. The bound is exact: with it, pushes take
	// an advisory lock on the table one at a time and count the live rows
	// (a count that grows with the depth). Requeue is not bounded. Zero or
	// less: no bound, and no lock.
	MaxDepth int
}

// Queue is a [queue.Queue] in a PostgreSQL table, shared by every
// gateway process connected to the database: dedupehttp.WithQueue makes an
// Async answer 202 only once its message is committed. Take locks the first
// visible row with FOR UPDATE SKIP LOCKED, so concurrent takers never wait
// for each other nor take one row twice, and hides it for the visibility
// timeout by moving its visible_at; a row whose worker died becomes visible
// again when that time passes. A partial unique index on the key of live
// rows keeps one live message per key. Times are the server's (now()).
//
// A Queue does not own its pool: Close leaves it open. A Queue is safe for
// concurrent use.
type Queue struct {
	pool *pgxpool.Pool
	cfg  QueueConfig
	sql  queueStatements

	mu        sync.Mutex
	wake      chan struct{} // closed when this process pushed or put back
	closed    bool
	done      chan struct{}
	lastSweep time.Time
}

var _ queue.Queue = (*Queue)(nil)

// NewQueue returns a queue in cfg.Table on pool, creating the table and its
// indexes if they are missing (under an advisory lock, so that processes
// starting together do not race).
func NewQueue(ctx context.Context, pool *pgxpool.Pool, cfg QueueConfig) (*Queue, error) {
	if pool == nil {
		return nil, errors.New("dedupe: postgres queue: nil pool")
	}
	for _, d := range []time.Duration{cfg.Visibility, cfg.Retention, cfg.PollInterval} {
		if d < 0 {
			return nil, fmt.Errorf("dedupe: postgres queue: negative duration %v", d)
		}
	}
	if cfg.Table == "" {
		cfg.Table = DefaultQueueTable
	}
	ident, err := parseTable(cfg.Table)
	if err != nil {
		return nil, err
	}
	cfg.Visibility = positiveOr(cfg.Visibility, queue.DefaultVisibility)
	cfg.Retention = positiveOr(cfg.Retention, queue.DefaultRetention)
	cfg.PollInterval = positiveOr(cfg.PollInterval, queue.DefaultPollInterval)
	q := &Queue{pool: pool, cfg: cfg, sql: newQueueStatements(ident), wake: make(chan struct{}), done: make(chan struct{})}
	if err := q.createTable(ctx); err != nil {
		return nil, fmt.Errorf("dedupe: postgres queue: create %s: %w", cfg.Table, err)
	}
	return q, nil
}

func positiveOr(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// queueStatements are the SQL texts of a Queue, built once for its table.
// Durations travel as whole microseconds.
type queueStatements struct {
	lockKey, schema               string
	table, hasReason, addReason   string
	push, depth, take             string
	extend, requeue, fail, done   string
	status, count, failed, revive string
	sweep                         string
}

func newQueueStatements(ident pgx.Identifier) queueStatements {
	t := ident.Sanitize()
	index := func(suffix string) string { return pgx.Identifier{ident[len(ident)-1] + suffix}.Sanitize() }
	const after = `now() + %s::bigint * interval '1 microsecond'`
	const retained = `now() - %s::bigint * interval '1 microsecond'`
	const entry = `id, key, state, attempts, accepted_at, updated_at, coalesce(reason, '')`
	return queueStatements{
		lockKey:   "dedupe_queue:" + t,
		table:     t,
		hasReason: `SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::regclass AND attname = 'reason' AND NOT attisdropped)`,
		addReason: `ALTER TABLE ` + t + ` ADD COLUMN IF NOT EXISTS reason text`,
		schema: `CREATE TABLE IF NOT EXISTS ` + t + ` (
	id text PRIMARY KEY, key text NOT NULL, state smallint NOT NULL,
	attempts integer NOT NULL DEFAULT 0, receipt text, visible_at timestamptz NOT NULL,
	accepted_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, data bytea, reason text);
CREATE UNIQUE INDEX IF NOT EXISTS ` + index("_live_idx") + ` ON ` + t + ` (key) WHERE state < 3;
CREATE INDEX IF NOT EXISTS ` + index("_visible_idx") + ` ON ` + t + ` (visible_at) WHERE state < 3;
CREATE INDEX IF NOT EXISTS ` + index("_settled_idx") + ` ON ` + t + ` (updated_at) WHERE state >= 3`,
		// The insert's arbiter is the unique index of live keys, checked
		// against the latest committed rows: when it skips, the live row is
		// read in the statement's snapshot, which may predate it; Push then
		// asks again.
		push: `WITH ins AS (
	INSERT INTO ` + t + ` (id, key, state, visible_at, accepted_at, updated_at, data)
	VALUES ($1, $2, 1, now(), now(), now(), $3)
	ON CONFLICT (key) WHERE state < 3 DO NOTHING
	RETURNING id)
SELECT id, true FROM ins
UNION ALL
SELECT id, false FROM ` + t + ` WHERE key = $2 AND state < 3 AND NOT EXISTS (SELECT 1 FROM ins)`,
		take: `UPDATE ` + t + ` SET state = 2, attempts = attempts + 1, receipt = $1,
	visible_at = ` + fmt.Sprintf(after, "$2") + `, updated_at = now()
WHERE id = (SELECT id FROM ` + t + ` WHERE state < 3 AND visible_at <= now()
	ORDER BY visible_at LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING data, attempts`,
		extend: `UPDATE ` + t + ` SET visible_at = ` + fmt.Sprintf(after, "$3") + ` WHERE id = $1 AND receipt = $2 AND state = 2`,
		requeue: `UPDATE ` + t + ` SET state = 1, receipt = NULL, visible_at = ` + fmt.Sprintf(after, "$3") + `, updated_at = now(),
	attempts = attempts - $4 WHERE id = $1 AND receipt = $2 AND state = 2`,
		fail: `UPDATE ` + t + ` SET state = 4, receipt = NULL, reason = $3, updated_at = now() WHERE id = $1 AND receipt = $2 AND state = 2`,
		done: `UPDATE ` + t + ` SET state = 3, receipt = NULL, data = NULL, reason = NULL, updated_at = now() WHERE id = $1 AND state <> 3`,
		status: `SELECT ` + entry + ` FROM ` + t + `
WHERE id = $1 AND (state < 3 OR updated_at > ` + fmt.Sprintf(retained, "$2") + `)`,
		depth: `SELECT count(*), count(*) FILTER (WHERE key = $1) FROM ` + t + ` WHERE state < 3`,
		count: `SELECT count(*) FILTER (WHERE state < 3), count(*) FILTER (WHERE state = 4 AND updated_at > ` + fmt.Sprintf(retained, "$1") + `)
FROM ` + t + ` WHERE state <> 3`,
		failed: `SELECT ` + entry + ` FROM ` + t + ` WHERE state = 4 AND updated_at > ` + fmt.Sprintf(retained, "$1") + `
ORDER BY updated_at DESC LIMIT $2`,
		revive: `UPDATE ` + t + ` AS m SET state = 1, attempts = 0, reason = NULL, receipt = NULL, visible_at = now(), updated_at = now()
WHERE id = $1 AND state = 4 AND updated_at > ` + fmt.Sprintf(retained, "$2") + ` AND data IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM ` + t + ` AS l WHERE l.key = m.key AND l.state < 3)`,
		sweep: `DELETE FROM ` + t + ` WHERE id IN (SELECT id FROM ` + t + `
	WHERE state >= 3 AND updated_at <= now() - $1::bigint * interval '1 microsecond' LIMIT 1000)`,
	}
}

// createTable creates the table and its indexes in one transaction holding
// an advisory lock on the table's name.
func (q *Queue) createTable(ctx context.Context) error {
	return pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, q.sql.lockKey); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, q.sql.schema); err != nil {
			return err
		}
		var has bool // a table of an earlier version has no reason
		if err := tx.QueryRow(ctx, q.sql.hasReason, q.sql.table).Scan(&has); err != nil || has {
			return err
		}
		_, err := tx.Exec(ctx, q.sql.addReason)
		return err
	})
}

// check returns the error a call fails with before it does anything.
func (q *Queue) check(ctx context.Context) error {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return queue.ErrClosed
	}
	return ctx.Err()
}

// queueErr wraps err from operation op, but the sentinels and context errors.
func queueErr(op string, err error) error {
	if errors.Is(err, queue.ErrClosed) || errors.Is(err, queue.ErrStaleDelivery) || errors.Is(err, queue.ErrFull) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("dedupe: postgres queue: %s: %w", op, err)
}

// Push inserts m unless a live message has its key; see [queue.Queue].
// The row is committed when Push returns.
func (q *Queue) Push(ctx context.Context, m queue.Message) (string, bool, error) {
	if err := q.check(ctx); err != nil {
		return "", false, err
	}
	data, err := m.MarshalBinary()
	if err != nil {
		return "", false, queueErr("push", err)
	}
	if q.cfg.MaxDepth > 0 {
		return q.pushBounded(ctx, m, data)
	}
	for range 5 {
		var id string
		var added bool
		err := q.pool.QueryRow(ctx, q.sql.push, m.ID, m.Key.String(), data).Scan(&id, &added)
		if errors.Is(err, pgx.ErrNoRows) { // the live row is newer than the snapshot
			continue
		}
		if err != nil {
			return "", false, queueErr("push", err)
		}
		if added {
			q.wakeTakers()
		}
		return id, added, nil
	}
	return "", false, queueErr("push", errors.New("the live message of the key kept changing"))
}

// wakeTakers wakes the Takes of this process waiting, to look again.
func (q *Queue) wakeTakers() {
	q.mu.Lock()
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
}
