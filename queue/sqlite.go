package queue

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe"
	_ "modernc.org/sqlite" // the "sqlite" driver
)

// Defaults of [SQLiteConfig].
const (
	// DefaultSQLiteTable is the default [SQLiteConfig.Table].
	DefaultSQLiteTable = "dedupe_queue"
	// DefaultSQLiteBusyTimeout is the default
	// [SQLiteConfig.BusyTimeout].
	DefaultSQLiteBusyTimeout = 5 * time.Second
)

// SQLiteConfig configures a [SQLite]. The zero value gives the
// defaults.
type SQLiteConfig struct {
	// Table is the queue's table, created if missing. The name must match
	// [A-Za-z_][A-Za-z0-9_]*, be at most 64 bytes and not start with
	// "sqlite_". Default [DefaultSQLiteTable].
	Table string
	// Visibility is how long a take hides a message. Default
	// [DefaultVisibility].
	Visibility time.Duration
	// Retention is how long the state of a done or failed message is kept;
	// Take deletes older ones, at most once a minute. Default
	// [DefaultRetention].
	Retention time.Duration
	// PollInterval is how often Take looks for a message pushed by another
	// process, or whose visibility timeout ran out. Default
	// [DefaultPollInterval].
	PollInterval time.Duration
	// BusyTimeout bounds how long a write waits for another process holding
	// the database's write lock. Default [DefaultSQLiteBusyTimeout].
	BusyTimeout time.Duration
	// MaxDepth bounds the live (queued or processing) messages of the table:
	// Push refuses more with [ErrFull], exactly, whichever process pushes.
	// Zero or less: no bound.
	MaxDepth int
	// Now is the queue's clock. Default time.Now. Every process sharing the
	// file must have the same time.
	Now func() time.Time
}

// SQLite is a [Queue] in a SQLite database file, for the processes of
// one host: a message is committed with synchronous=FULL in WAL mode before
// Push returns, so neither a crash of the process nor a power loss loses an
// accepted message. Processes on one host may share the file, each with its
// own Async; a network file system will not do. It runs on
// modernc.org/sqlite (no cgo). A SQLite is safe for concurrent use.
type SQLite struct {
	db  *sql.DB
	cfg SQLiteConfig
	sql sqliteQueueStatements

	mu        sync.Mutex
	wake      chan struct{} // closed when this process pushed or put back
	closed    bool
	done      chan struct{}
	lastSweep time.Time
}

var _ Queue = (*SQLite)(nil)

var sqliteQueueTableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)

// OpenSQLite opens (creating it if needed) the SQLite database at path,
// puts it in WAL mode, creates the queue's table if it is missing, and
// returns the queue. The queue owns the database: Close closes it. The file
// may be the one of a [dedupe.SQLiteStore]; the table names differ.
func OpenSQLite(path string, cfg SQLiteConfig) (*SQLite, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("dedupe: sqlite queue: open %q: want the path of a database file", path)
	}
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate",
		esc, cfg.BusyTimeout.Milliseconds())
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("dedupe: sqlite queue: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1) // one writer per process; processes share by locks
	q := &SQLite{db: db, cfg: cfg, sql: newSQLiteQueueStatements(`"` + cfg.Table + `"`),
		wake: make(chan struct{}), done: make(chan struct{})}
	if err := q.createTable(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("dedupe: sqlite queue: open %s: %w", path, err)
	}
	return q, nil
}

func (cfg *SQLiteConfig) normalize() error {
	if cfg.Table == "" {
		cfg.Table = DefaultSQLiteTable
	}
	if !sqliteQueueTableName.MatchString(cfg.Table) || strings.HasPrefix(strings.ToLower(cfg.Table), "sqlite_") {
		return fmt.Errorf("dedupe: sqlite queue: invalid table name %q", cfg.Table)
	}
	for _, d := range []*time.Duration{&cfg.Visibility, &cfg.Retention, &cfg.PollInterval, &cfg.BusyTimeout} {
		if *d < 0 {
			return fmt.Errorf("dedupe: sqlite queue: negative duration %v", *d)
		}
	}
	cfg.Visibility = orDefault(cfg.Visibility, DefaultVisibility)
	cfg.Retention = orDefault(cfg.Retention, DefaultRetention)
	cfg.PollInterval = orDefault(cfg.PollInterval, DefaultPollInterval)
	cfg.BusyTimeout = orDefault(cfg.BusyTimeout, DefaultSQLiteBusyTimeout)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return nil
}

// orDefault returns d if it is positive, and def otherwise.
func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// sqliteQueueStatements are the SQL texts of a SQLite queue, built once for
// its table. Times are Unix nanoseconds by the queue's clock.
type sqliteQueueStatements struct {
	schema                      []string
	hasReason, addReason        string
	push, live, depth, take     string
	extend, requeue, fail, done string
	status, count, failed       string
	revive, sweep               string
}

func newSQLiteQueueStatements(t string) sqliteQueueStatements {
	idx := func(suffix string) string { return `"` + strings.Trim(t, `"`) + suffix + `"` }
	const entry = `id, key, state, attempts, accepted_at, updated_at, coalesce(reason, '')`
	return sqliteQueueStatements{
		schema: []string{
			`CREATE TABLE IF NOT EXISTS ` + t + ` (
	id TEXT PRIMARY KEY, key TEXT NOT NULL, state INTEGER NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0, receipt TEXT, visible_at INTEGER NOT NULL,
	accepted_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, data BLOB, reason TEXT)`,
			`CREATE UNIQUE INDEX IF NOT EXISTS ` + idx("_live") + ` ON ` + t + ` (key) WHERE state < 3`,
			`CREATE INDEX IF NOT EXISTS ` + idx("_visible") + ` ON ` + t + ` (visible_at) WHERE state < 3`,
			`CREATE INDEX IF NOT EXISTS ` + idx("_settled") + ` ON ` + t + ` (updated_at) WHERE state >= 3`,
		},
		hasReason: `SELECT count(*) > 0 FROM pragma_table_info('` + strings.Trim(t, `"`) + `') WHERE name = 'reason'`,
		addReason: `ALTER TABLE ` + t + ` ADD COLUMN reason TEXT`,
		push: `INSERT INTO ` + t + ` (id, key, state, visible_at, accepted_at, updated_at, data)
VALUES (?1, ?2, 1, ?3, ?3, ?3, ?4) ON CONFLICT (key) WHERE state < 3 DO NOTHING`,
		live:  `SELECT id FROM ` + t + ` WHERE key = ? AND state < 3`,
		depth: `SELECT count(*), coalesce(sum(key = ?1), 0) FROM ` + t + ` WHERE state < 3`,
		take: `UPDATE ` + t + ` SET state = 2, attempts = attempts + 1, receipt = ?1, visible_at = ?2, updated_at = ?3
WHERE id = (SELECT id FROM ` + t + ` WHERE state < 3 AND visible_at <= ?3 ORDER BY visible_at, rowid LIMIT 1)
RETURNING data, attempts`,
		extend: `UPDATE ` + t + ` SET visible_at = ?1 WHERE id = ?2 AND receipt = ?3 AND state = 2`,
		requeue: `UPDATE ` + t + ` SET state = 1, receipt = NULL, visible_at = ?1, updated_at = ?4, attempts = attempts - ?5
WHERE id = ?2 AND receipt = ?3 AND state = 2`,
		fail:   `UPDATE ` + t + ` SET state = 4, receipt = NULL, reason = ?4, updated_at = ?1 WHERE id = ?2 AND receipt = ?3 AND state = 2`,
		done:   `UPDATE ` + t + ` SET state = 3, receipt = NULL, data = NULL, reason = NULL, updated_at = ?1 WHERE id = ?2 AND state <> 3`,
		status: `SELECT ` + entry + ` FROM ` + t + ` WHERE id = ?1 AND (state < 3 OR updated_at > ?2)`,
		count:  `SELECT coalesce(sum(state < 3), 0), coalesce(sum(state = 4 AND updated_at > ?1), 0) FROM ` + t + ` WHERE state <> 3`,
		failed: `SELECT ` + entry + ` FROM ` + t + ` WHERE state = 4 AND updated_at > ?1 ORDER BY updated_at DESC LIMIT ?2`,
		revive: `UPDATE ` + t + ` SET state = 1, attempts = 0, reason = NULL, visible_at = ?2, updated_at = ?2
WHERE id = ?1 AND state = 4 AND updated_at > ?3 AND data IS NOT NULL
	AND NOT EXISTS (SELECT 1 FROM ` + t + ` AS l WHERE l.key = ` + t + `.key AND l.state < 3)`,
		sweep: `DELETE FROM ` + t + ` WHERE rowid IN (SELECT rowid FROM ` + t + ` WHERE state >= 3 AND updated_at <= ? LIMIT 1000)`,
	}
}

func (q *SQLite) createTable() error {
	ctx, cancel := context.WithTimeout(context.Background(), q.cfg.BusyTimeout+time.Second)
	defer cancel()
	return q.write(ctx, func(tx *sql.Tx) error {
		for _, s := range q.sql.schema {
			if _, err := tx.ExecContext(ctx, s); err != nil {
				return err
			}
		}
		var hasReason bool // a table of an earlier version has no reason
		if err := tx.QueryRowContext(ctx, q.sql.hasReason).Scan(&hasReason); err != nil || hasReason {
			return err
		}
		_, err := tx.ExecContext(ctx, q.sql.addReason)
		return err
	})
}

// write runs f in a transaction that holds the write lock from its start.
func (q *SQLite) write(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := q.db.BeginTx(ctx, nil) // BEGIN IMMEDIATE (_txlock)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// check returns the error a call fails with before it does anything.
func (q *SQLite) check(ctx context.Context) error {
	q.mu.Lock()
	closed := q.closed
	q.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return ctx.Err()
}

func sqliteQueueErr(op string, err error) error {
	if errors.Is(err, ErrClosed) || errors.Is(err, ErrStaleDelivery) || errors.Is(err, ErrFull) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("dedupe: sqlite queue: %s: %w", op, err)
}

// Push queues m unless a live message has its key; see [Queue]. The message
// is committed when Push returns.
func (q *SQLite) Push(ctx context.Context, m Message) (string, bool, error) {
	if err := q.check(ctx); err != nil {
		return "", false, err
	}
	data, err := m.MarshalBinary()
	if err != nil {
		return "", false, sqliteQueueErr("push", err)
	}
	var id string
	added := false
	err = q.write(ctx, func(tx *sql.Tx) error {
		if err := q.checkDepth(ctx, tx, m.Key); err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, q.sql.push, m.ID, m.Key.String(), q.cfg.Now().UnixNano(), data)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 1 {
			id, added = m.ID, true
			return nil
		}
		// The live message cannot change under the write lock.
		return tx.QueryRowContext(ctx, q.sql.live, m.Key.String()).Scan(&id)
	})
	if err != nil {
		return "", false, sqliteQueueErr("push", err)
	}
	if added {
		q.wakeTakers()
	}
	return id, added, nil
}

// checkDepth returns [ErrFull] if the queue has a depth bound, holds that
// many live messages, and none of them has key (a push of a copy adds
// nothing). It runs under the write lock, so the bound is exact.
func (q *SQLite) checkDepth(ctx context.Context, tx *sql.Tx, key dedupe.Key) error {
	if q.cfg.MaxDepth <= 0 {
		return nil
	}
	var live, mine int
	if err := tx.QueryRowContext(ctx, q.sql.depth, key.String()).Scan(&live, &mine); err != nil {
		return err
	}
	if mine == 0 && live >= q.cfg.MaxDepth {
		return ErrFull
	}
	return nil
}

// wakeTakers wakes the Takes of this process waiting, to look again.
func (q *SQLite) wakeTakers() {
	q.mu.Lock()
	close(q.wake)
	q.wake = make(chan struct{})
	q.mu.Unlock()
}

// Take waits for a visible message and hides it; see [Queue]. It looks again
// every [SQLiteConfig.PollInterval], and at once when this process
// pushes or puts a message back.
func (q *SQLite) Take(ctx context.Context) (Delivery, error) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		q.mu.Lock()
		wake := q.wake
		q.mu.Unlock()
		d, ok, err := q.tryTake(ctx)
		if err != nil && q.check(context.Background()) != nil {
			return Delivery{}, ErrClosed // closed mid-call
		}
		if err != nil || ok {
			return d, err
		}
		timer.Reset(q.cfg.PollInterval)
		select {
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case <-q.done:
			return Delivery{}, ErrClosed
		case <-ctx.Done():
			return Delivery{}, ctx.Err()
		}
	}
}

// tryTake takes the first visible message, if there is one.
func (q *SQLite) tryTake(ctx context.Context) (Delivery, bool, error) {
	if err := q.check(ctx); err != nil {
		return Delivery{}, false, err
	}
	now := q.cfg.Now()
	q.sweep(ctx, now)
	receipt := NewReceipt()
	var data []byte
	var attempts int
	err := q.write(ctx, func(tx *sql.Tx) error {
		return tx.QueryRowContext(ctx, q.sql.take, receipt, now.Add(q.cfg.Visibility).UnixNano(), now.UnixNano()).
			Scan(&data, &attempts)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return Delivery{}, false, nil
	}
	if err != nil {
		return Delivery{}, false, sqliteQueueErr("take", err)
	}
	d := Delivery{Attempt: attempts, Receipt: receipt, Visibility: q.cfg.Visibility}
	if err := d.Message.UnmarshalBinary(data); err != nil {
		return Delivery{}, false, sqliteQueueErr("take", err)
	}
	return d, true, nil
}

// sqliteSweepEvery is the least time between two sweeps of settled rows.
const sqliteSweepEvery = time.Minute

// sweep deletes settled rows past the retention, at most once a minute.
// Its errors are left to the next sweep: the rows are invisible anyway.
func (q *SQLite) sweep(ctx context.Context, now time.Time) {
	q.mu.Lock()
	due := now.Sub(q.lastSweep) >= sqliteSweepEvery
	if due {
		q.lastSweep = now
	}
	q.mu.Unlock()
	if due {
		_ = q.write(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, q.sql.sweep, now.Add(-q.cfg.Retention).UnixNano())
			return err
		})
	}
}

// Update moves d on as c says; see [Queue].
func (q *SQLite) Update(ctx context.Context, d Delivery, c Change) error {
	if err := q.check(ctx); err != nil {
		return err
	}
	now := q.cfg.Now()
	var stmt string
	var args []any
	switch c.State {
	case StateProcessing:
		stmt, args = q.sql.extend, []any{now.Add(capAfter(c.After, q.cfg.Visibility, q.cfg.Visibility)).UnixNano(), d.ID, d.Receipt}
	case StateQueued:
		uncount := 0
		if c.NotRun {
			uncount = 1
		}
		stmt, args = q.sql.requeue, []any{now.Add(capAfter(c.After, 0, q.cfg.Visibility)).UnixNano(), d.ID, d.Receipt,
			now.UnixNano(), uncount}
	case StateFailed:
		stmt, args = q.sql.fail, []any{now.UnixNano(), d.ID, d.Receipt, c.Reason}
	case StateDone:
		stmt, args = q.sql.done, []any{now.UnixNano(), d.ID}
	default:
		return fmt.Errorf("dedupe: sqlite queue: update to state %d", c.State)
	}
	n, err := q.exec(ctx, stmt, args...)
	switch {
	case err != nil:
		return sqliteQueueErr("update", err)
	case n == 0 && c.State != StateDone:
		return fmt.Errorf("%w: %s", ErrStaleDelivery, d.ID)
	}
	if c.State == StateQueued {
		q.wakeTakers()
	}
	return nil
}

// exec runs one statement in a write transaction and returns the number of
// rows it changed.
func (q *SQLite) exec(ctx context.Context, stmt string, args ...any) (int64, error) {
	var n int64
	err := q.write(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, stmt, args...)
		if err == nil {
			n, _ = res.RowsAffected()
		}
		return err
	})
	return n, err
}

// Status returns the state of the message with id; see [Queue].
func (q *SQLite) Status(ctx context.Context, id string) (Entry, bool, error) {
	if err := q.check(ctx); err != nil {
		return Entry{}, false, err
	}
	e, err := scanSQLiteEntry(q.db.QueryRowContext(ctx, q.sql.status, id, q.retained()))
	if errors.Is(err, sql.ErrNoRows) {
		return Entry{}, false, nil
	}
	if err != nil {
		return Entry{}, false, sqliteQueueErr("status", err)
	}
	return e, true, nil
}

// retained is the time before which settled rows are forgotten.
func (q *SQLite) retained() int64 { return q.cfg.Now().Add(-q.cfg.Retention).UnixNano() }

// scanSQLiteEntry reads an entry from a row of the statements' entry columns.
func scanSQLiteEntry(row interface{ Scan(...any) error }) (Entry, error) {
	var id, key, reason string
	var state, attempts int
	var accepted, updated int64
	if err := row.Scan(&id, &key, &state, &attempts, &accepted, &updated, &reason); err != nil {
		return Entry{}, err
	}
	k, err := dedupe.ParseKey(key)
	if err != nil {
		return Entry{}, err
	}
	return Entry{ID: id, Key: k, State: State(state), Attempts: attempts,
		Accepted: time.Unix(0, accepted), Updated: time.Unix(0, updated), Reason: reason}, nil
}

// Count counts the live rows and the failed ones kept.
func (q *SQLite) Count(ctx context.Context) (Counts, error) {
	if err := q.check(ctx); err != nil {
		return Counts{}, err
	}
	var c Counts
	if err := q.db.QueryRowContext(ctx, q.sql.count, q.retained()).Scan(&c.Live, &c.Failed); err != nil {
		return Counts{}, sqliteQueueErr("count", err)
	}
	return c, nil
}

// Failed returns the latest failed messages; see [Queue].
func (q *SQLite) Failed(ctx context.Context, limit int) ([]Entry, error) {
	if err := q.check(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultFailedLimit
	}
	rows, err := q.db.QueryContext(ctx, q.sql.failed, q.retained(), limit)
	if err != nil {
		return nil, sqliteQueueErr("failed", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e, err := scanSQLiteEntry(rows)
		if err != nil {
			return nil, sqliteQueueErr("failed", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, sqliteQueueErr("failed", err)
	}
	return out, nil
}

// Requeue puts the failed message with id back; see [Queue].
func (q *SQLite) Requeue(ctx context.Context, id string) (bool, error) {
	if err := q.check(ctx); err != nil {
		return false, err
	}
	n, err := q.exec(ctx, q.sql.revive, id, q.cfg.Now().UnixNano(), q.retained())
	if err != nil {
		return false, sqliteQueueErr("requeue", err)
	}
	if n == 1 {
		q.wakeTakers()
	}
	return n == 1, nil
}

// Close wakes every Take with [ErrClosed] and closes the database. The
// messages stay in the file. It may be called more than once.
func (q *SQLite) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.done)
	q.mu.Unlock()
	if err := q.db.Close(); err != nil {
		return fmt.Errorf("dedupe: sqlite queue: close: %w", err)
	}
	return nil
}
