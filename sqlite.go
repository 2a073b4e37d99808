package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [SQLiteConfig].
const (
	// defaultSQLiteTable is the marks table of the NekoBot gateway, the default
	// [SQLiteConfig.Table].
	defaultSQLiteTable = "gateway_dedupe"
	// defaultSQLiteBusyTimeout is the default [SQLiteConfig.BusyTimeout].
	defaultSQLiteBusyTimeout = 5 * time.Second
	// defaultSQLiteCleanupBatch is the default [SQLiteConfig.CleanupBatch].
	defaultSQLiteCleanupBatch = 1000
)

// SQLiteConfig configures a [SQLiteStore]. The zero value gives the defaults.
type SQLiteConfig struct {
	TTL   time.Duration // for Mark with ttl <= 0; default 24 h
	Lease time.Duration // for Claim and Extend with lease <= 0; default 5 min
	// Table is the marks table, NekoBot's gateway_dedupe by default; claims
	// go to Table+"_claims". It must match [A-Za-z_][A-Za-z0-9_]*, be at most
	// 64 bytes and not start with "sqlite_".
	Table string
	// Location is the time zone of the naive timestamps in the marks table:
	// that of the NekoBot process sharing the file. Default time.Local. A
	// wrong zone shifts every time (a file written 8 h east reads 8 h
	// ahead: expired marks live, every expiry 8 h late); when the marks
	// inserted last read as created more than 5 min in the future, the
	// store logs a warning through Logger at open.
	Location *time.Location
	Now      func() time.Time // the store's clock; default time.Now
	// CleanupInterval, when > 0, starts a goroutine that calls
	// [SQLiteStore.CleanupExpired] at this interval, stopped by Close. Default
	// 0: expired rows stay until CleanupExpired (absent all the same).
	CleanupInterval time.Duration
	// Synchronous is "FULL" (the default: every write survives power loss
	// before the call returns) or "NORMAL" (it survives a crash of the
	// process, but power loss may undo the last writes).
	Synchronous string
	// BusyTimeout bounds how long a write waits for another connection's or
	// process's write lock. Default 5 s.
	BusyTimeout time.Duration
	// CleanupBatch bounds the rows per table of one cleanup transaction, so
	// writers never wait long. Default 1000.
	CleanupBatch int
	// Logger receives the background sweeper's errors, and the warning of
	// [SQLiteStore] about marks created in the future (a wrong Location).
	// Default slog.Default().
	Logger *slog.Logger
	// ReadOnly opens the file for reading only, as a tool inspecting a live
	// gateway's file does: the database is opened with mode=ro and
	// query_only, nothing is created, the journal mode is left as it is, and
	// every write returns [ErrReadOnly]. The file and the marks table must
	// exist; the claims and results tables may be missing (no claims, no
	// results). CleanupInterval must be 0. Default false.
	ReadOnly bool
}

// SQLiteStore is a [Store] in a SQLite database file (modernc.org/sqlite, no
// cgo): marks survive a restart and are shared by every process on the host
// that opens the file.
//
// Marks live in the NekoBot gateway's table gateway_dedupe (dedupe_key,
// channel_id, message_id, created_at, expires_at), created if missing, with
// timestamps as NekoBot writes them: naive ISO-8601 in [SQLiteConfig.Location]
// with microseconds ("2026-11-29T20:28:32.891874"). It also reads RFC 3339 and
// NULL (present forever, as in NekoBot), so a Go gateway and a NekoBot process
// can share one file. Claims live in a table of their own (Table+"_claims"),
// which NekoBot never reads. Naive local times repeat when a daylight-saving
// zone falls back; UTC avoids that.
//
// All writes go through one goroutine that batches the calls waiting at that
// moment into one transaction (group commit); each call returns after its own
// write committed, with its own result, and a failing call does not fail the
// others. Writes begin with BEGIN IMMEDIATE, so Claim is atomic across
// processes, and wait for another process's lock up to [SQLiteConfig].BusyTimeout.
type SQLiteStore struct {
	db           *sql.DB
	ownDB        bool
	ttl          time.Duration
	lease        time.Duration
	loc          *time.Location
	now          func() time.Time
	busy         time.Duration
	cleanupBatch int
	readOnly     bool   // SQLiteConfig.ReadOnly
	noClaims     bool   // read-only, and the claims table is missing
	noResults    bool   // read-only, and the results table is missing
	table        string // the marks table's name, for messages
	marks        string // quoted identifiers
	claims       string
	results      string
	log          *slog.Logger

	conn    *sql.Conn        // the writer's connection, owned by the writer goroutine
	restore []string         // pragmas that give a caller's connection back as it was
	stmt    sqliteStatements // prepared on conn, but for exists on db
	queue   sqliteQueue

	closed      atomic.Bool
	stopSweep   context.CancelFunc
	sweeperDone chan struct{}
	closeOnce   sync.Once
	closeErr    error
}

const (
	sqliteMaxTableLen  = 64
	sqliteMaxReadConns = 8
)

// OpenSQLite opens the SQLite database file at path, creating it if missing
// (its directory must exist), puts it in WAL mode (readers never wait for the
// writer; other programs on the host, NekoBot included, need write access to the
// directory; no network file systems), creates the tables if missing, and
// returns a store that owns the database: Close closes it. It refuses "",
// ":memory:" and "file:" URIs, a file that is not a SQLite database, a read-only
// file, tables of an incompatible shape and an invalid cfg, and then changes
// nothing in the file.
func OpenSQLite(path string, cfg SQLiteConfig) (*SQLiteStore, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if err := checkSQLitePath(path); err != nil {
		return nil, sqliteFail("open", path, err, cfg.BusyTimeout)
	}
	// A file: URI, so that no character of path is taken for a query.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=synchronous(%s)",
		esc, sqliteBusySlice.Milliseconds(), cfg.Synchronous)
	if cfg.ReadOnly {
		if _, err := os.Stat(path); err != nil {
			return nil, sqliteFail("open", path, err, cfg.BusyTimeout)
		}
		dsn += "&mode=ro&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, sqliteFail("open", path, err, cfg.BusyTimeout)
	}
	db.SetMaxOpenConns(sqliteMaxReadConns + 1)
	db.SetMaxIdleConns(sqliteMaxReadConns + 1)
	s, err := newSQLiteStore(db, cfg, path)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// checkSQLitePath returns why path cannot be the file of a database, if it
// cannot.
func checkSQLitePath(path string) error {
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return errors.New("want the path of a database file")
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("directory %s does not exist", dir)
		}
		return err
	} else if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return errors.New("is a directory")
	}
	return nil
}

// NewSQLiteStore returns a store on db, an open database of the "sqlite" driver
// of modernc.org/sqlite that the caller owns (Close leaves it open). It creates
// the tables if missing and takes one connection of db for its writes, so db
// must allow at least two; it leaves the journal mode as it is: set WAL in the
// DSN ("_pragma=journal_mode(WAL)") so that readers run while it writes.
func NewSQLiteStore(db *sql.DB, cfg SQLiteConfig) (*SQLiteStore, error) {
	if db == nil {
		return nil, errors.New("dedupe: sqlite: open: nil *sql.DB")
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if n := db.Stats().MaxOpenConnections; n == 1 {
		return nil, errors.New("dedupe: sqlite: open: the *sql.DB allows one open connection; the store needs one for its writes and more for reads")
	}
	return newSQLiteStore(db, cfg, "")
}

// normalize checks cfg and fills in the defaults of its zero fields.
func (cfg *SQLiteConfig) normalize() error {
	cfg.TTL = orDefault(cfg.TTL, DefaultTTL)
	cfg.Lease = orDefault(cfg.Lease, DefaultLease)
	if cfg.Table == "" {
		cfg.Table = defaultSQLiteTable
	}
	if err := checkSQLiteTable(cfg.Table); err != nil {
		return err
	}
	if cfg.Location == nil {
		cfg.Location = time.Local
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CleanupInterval < 0 {
		return fmt.Errorf("dedupe: sqlite: negative CleanupInterval %v", cfg.CleanupInterval)
	}
	if cfg.ReadOnly && cfg.CleanupInterval > 0 {
		return errors.New("dedupe: sqlite: a ReadOnly store cannot have a CleanupInterval")
	}
	switch strings.ToUpper(cfg.Synchronous) {
	case "", "FULL":
		cfg.Synchronous = "FULL"
	case "NORMAL":
		cfg.Synchronous = "NORMAL"
	default:
		return fmt.Errorf("dedupe: sqlite: Synchronous %q: want \"FULL\" or \"NORMAL\"", cfg.Synchronous)
	}
	if cfg.BusyTimeout < 0 {
		return fmt.Errorf("dedupe: sqlite: negative BusyTimeout %v", cfg.BusyTimeout)
	}
	cfg.BusyTimeout = orDefault(cfg.BusyTimeout, defaultSQLiteBusyTimeout)
	if cfg.CleanupBatch < 0 {
		return fmt.Errorf("dedupe: sqlite: negative CleanupBatch %d", cfg.CleanupBatch)
	}
	if cfg.CleanupBatch == 0 {
		cfg.CleanupBatch = defaultSQLiteCleanupBatch
	}
	return nil
}

// newSQLiteStore returns a store on db with cfg, normalized. path is the
// database file when the store owns db ([OpenSQLite]) and "" when the caller
// does ([NewSQLiteStore]).
func newSQLiteStore(db *sql.DB, cfg SQLiteConfig, path string) (*SQLiteStore, error) {
	s := &SQLiteStore{
		db:           db,
		ownDB:        path != "",
		ttl:          cfg.TTL,
		lease:        cfg.Lease,
		loc:          cfg.Location,
		now:          cfg.Now,
		busy:         cfg.BusyTimeout,
		cleanupBatch: cfg.CleanupBatch,
		readOnly:     cfg.ReadOnly,
		table:        cfg.Table,
		marks:        `"` + cfg.Table + `"`,
		claims:       `"` + cfg.Table + `_claims"`,
		results:      `"` + cfg.Table + `_results"`,
		log:          cfg.Logger,
		queue: sqliteQueue{
			wake: make(chan struct{}, 1),
			quit: make(chan struct{}),
			done: make(chan struct{}),
		},
	}
	ctx := context.Background()
	if err := s.retryBusy(ctx, nil, func() (err error) {
		s.conn, err = db.Conn(ctx)
		return err
	}); err != nil {
		return nil, s.fail("open", path, fmt.Errorf("connect: %w", err))
	}
	if err := s.setup(ctx, cfg); err != nil {
		s.closeConn()
		return nil, s.fail("open", path, err)
	}
	s.warnFutureMarks(ctx)
	go s.writer()
	if cfg.CleanupInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopSweep = cancel
		s.sweeperDone = make(chan struct{})
		go s.sweep(ctx, cfg.CleanupInterval)
	}
	return s, nil
}

// setup configures the writer's connection, checks the tables, puts a
// database the store owns in WAL mode, creates the tables that are missing
// and prepares the statements. It refuses incompatible tables before
// changing anything, the journal mode included.
func (s *SQLiteStore) setup(ctx context.Context, cfg SQLiteConfig) error {
	if err := s.configure(ctx, cfg.Synchronous); err != nil {
		return fmt.Errorf("configure: %w", err)
	}
	if err := s.checkTables(ctx); err != nil {
		return err
	}
	if s.readOnly {
		return s.setupReadOnly(ctx)
	}
	if s.ownDB {
		if err := s.setWAL(ctx); err != nil {
			return err
		}
	}
	if err := s.createTables(ctx); err != nil {
		return err
	}
	return s.prepare(ctx)
}

// configure sets the busy timeout and the synchronous setting of the
// writer's connection, after noting those of a caller's connection for Close
// to restore.
func (s *SQLiteStore) configure(ctx context.Context, synchronous string) error {
	if !s.ownDB {
		var busy int64
		var sync int
		if err := s.conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			return err
		}
		if err := s.conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			return err
		}
		s.restore = []string{fmt.Sprintf("PRAGMA busy_timeout = %d", busy), fmt.Sprintf("PRAGMA synchronous = %d", sync)}
	}
	for _, p := range []string{
		fmt.Sprintf("PRAGMA busy_timeout = %d", min(s.busy, sqliteBusySlice).Milliseconds()),
		"PRAGMA synchronous = " + synchronous,
	} {
		if _, err := s.conn.ExecContext(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// setWAL puts the database in WAL mode.
func (s *SQLiteStore) setWAL(ctx context.Context) error {
	var mode string
	if err := s.retryBusy(ctx, nil, func() error {
		return s.conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
	}); err != nil {
		return fmt.Errorf("set WAL mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("cannot switch to WAL mode, journal mode is %q", mode)
	}
	return nil
}

// Backend returns "sqlite".
func (s *SQLiteStore) Backend() string { return "sqlite" }

func (s *SQLiteStore) defaultTTL() time.Duration { return s.ttl }

// Exists reports whether key is marked and unexpired: one primary-key read
// that does not wait for writes in progress (in WAL mode).
func (s *SQLiteStore) Exists(ctx context.Context, key Key) (bool, error) {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return false, err
	}
	var exp sql.NullString
	dkey := key.String()
	// In WAL mode a read is busy only in rare moments (recovery); in a
	// rollback journal it is while another process commits.
	err := s.retryBusy(ctx, nil, func() error {
		return s.stmt.exists.QueryRowContext(ctx, dkey).Scan(&exp)
	})
	switch {
	case err == nil:
		return sqliteLive(exp, s.now(), s.loc), nil
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case s.closed.Load():
		return false, ErrClosed
	case ctx.Err() != nil:
		return false, ctx.Err()
	}
	return false, s.fail("exists", dkey, err)
}

// Mark records key as processed for ttl (ttl <= 0: the configured TTL) and
// returns once the mark is committed.
func (s *SQLiteStore) Mark(ctx context.Context, key Key, ttl time.Duration) error {
	if err := checkCall(ctx, s.closed.Load(), key); err != nil {
		return err
	}
	ttl = orDefault(ttl, s.ttl)
	dkey := key.String()
	return s.submit(ctx, "mark", dkey, func(ctx context.Context, now time.Time) error {
		return s.inSavepoint(ctx, func() error { return s.markRow(ctx, key, dkey, nil, now, ttl) })
	})
}

// markRow writes key's mark, and its result or none, in the writer's
// transaction.
func (s *SQLiteStore) markRow(ctx context.Context, key Key, dkey string, result []byte, now time.Time, ttl time.Duration) error {
	if _, err := s.stmt.claimDelete.ExecContext(ctx, dkey); err != nil {
		return err
	}
	created, expires := formatSQLiteTime(now, s.loc), formatSQLiteTime(now.Add(ttl), s.loc)
	if _, err := s.stmt.markUpsert.ExecContext(ctx, dkey, key.Channel, key.MessageID, created, expires); err != nil {
		return err
	}
	if len(result) == 0 {
		_, err := s.stmt.resultDelete.ExecContext(ctx, dkey)
		return err
	}
	_, err := s.stmt.resultUpsert.ExecContext(ctx, dkey, result, expires)
	return err
}

// Claim takes c.Key for c.Token unless it is marked (by this store or by
// NekoBot) or claimed by another token, atomically across processes; see
// [Store.Claim].
func (s *SQLiteStore) Claim(ctx context.Context, c Claim, lease time.Duration) (Status, error) {
	if err := checkCall(ctx, s.closed.Load(), c.Key); err != nil {
		return 0, err
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	lease = orDefault(lease, s.lease)
	dkey := c.Key.String()
	var status Status
	err := s.submit(ctx, "claim", dkey, func(ctx context.Context, now time.Time) (err error) {
		status, err = s.claimRow(ctx, dkey, c.Token, lease, now)
		return err
	})
	if err != nil {
		return 0, err
	}
	return status, nil
}

// claimRow is the write of Claim of dkey for token, in the writer's
// transaction.
func (s *SQLiteStore) claimRow(ctx context.Context, dkey, token string, lease time.Duration, now time.Time) (Status, error) {
	dup, err := s.marked(ctx, dkey, now)
	if err != nil {
		return 0, err
	}
	if dup {
		return Duplicate, nil
	}
	res, err := s.stmt.claimTake.ExecContext(ctx, dkey, token, now.Add(lease).UnixNano(), now.UnixNano())
	if err != nil {
		return 0, err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return Claimed, nil
	}
	return InFlight, nil
}

// Extend renews c's lease if c still holds its key; see [Store.Extend].
func (s *SQLiteStore) Extend(ctx context.Context, c Claim, lease time.Duration) error {
	if err := s.checkClaim(ctx, c); err != nil {
		return err
	}
	return s.owned(ctx, "extend", c, s.extendRow(orDefault(lease, s.lease)))
}

// extendRow returns the change of Extend for lease.
func (s *SQLiteStore) extendRow(lease time.Duration) sqliteChange {
	return func(ctx context.Context, c Claim, dkey string, now time.Time) (sql.Result, error) {
		return s.stmt.claimExtend.ExecContext(ctx, now.Add(lease).UnixNano(), dkey, c.Token, now.UnixNano())
	}
}

// Release drops c's claim if c still holds its key; see [Store.Release].
func (s *SQLiteStore) Release(ctx context.Context, c Claim) error {
	if err := s.checkClaim(ctx, c); err != nil {
		return err
	}
	return s.owned(ctx, "release", c, s.releaseRow)
}

// releaseRow is the change of Release.
func (s *SQLiteStore) releaseRow(ctx context.Context, c Claim, dkey string, now time.Time) (sql.Result, error) {
	return s.stmt.claimDrop.ExecContext(ctx, dkey, c.Token, now.UnixNano())
}

// checkClaim is [checkCall] for Extend and Release, which also refuse a
// token no claim can have.
func (s *SQLiteStore) checkClaim(ctx context.Context, c Claim) error {
	return checkClaimCall(ctx, s.closed.Load(), c)
}

// sqliteChange is the write of Extend or Release: it changes c's row of the
// claims table if c still holds its key, in the writer's transaction.
type sqliteChange func(ctx context.Context, c Claim, dkey string, now time.Time) (sql.Result, error)

// owned runs the write of Extend or Release (op), change. It returns
// [ErrNotOwner] if the key is marked or change changed no row.
func (s *SQLiteStore) owned(ctx context.Context, op string, c Claim, change sqliteChange) error {
	dkey := c.Key.String()
	var refused error
	err := s.submit(ctx, op, dkey, func(ctx context.Context, now time.Time) (err error) {
		refused, err = s.ownedRow(ctx, c, dkey, now, change)
		return err
	})
	if err != nil {
		return err
	}
	return refused
}

// ownedRow runs change of c, in the writer's transaction. refused is
// [ErrNotOwner] if the key is marked or change changed no row; err is the
// failure of a statement.
func (s *SQLiteStore) ownedRow(ctx context.Context, c Claim, dkey string, now time.Time, change sqliteChange) (refused, err error) {
	dup, err := s.marked(ctx, dkey, now)
	if err != nil {
		return nil, err
	}
	if dup {
		return fmt.Errorf("%w: %s is marked", ErrNotOwner, c.Key), nil
	}
	res, err := change(ctx, c, dkey, now)
	if err != nil {
		return nil, err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: %s", ErrNotOwner, c.Key), nil
	}
	return nil, nil
}

// marked reports whether dkey has an unexpired mark, read in the writer's
// transaction.
func (s *SQLiteStore) marked(ctx context.Context, dkey string, now time.Time) (bool, error) {
	var exp sql.NullString
	err := s.stmt.markGet.QueryRowContext(ctx, dkey).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return sqliteLive(exp, now, s.loc), nil
}

// Close finishes the queued writes, stops the sweeper and the writer, and
// closes the database if [OpenSQLite] opened it. It is idempotent; later calls
// return [ErrClosed].
func (s *SQLiteStore) Close() error {
	s.closeOnce.Do(func() {
		s.queue.mu.Lock()
		s.closed.Store(true) // under the queue's lock: no call is queued after this
		s.queue.mu.Unlock()
		if s.stopSweep != nil {
			s.stopSweep()
			<-s.sweeperDone
		}
		close(s.queue.quit)
		<-s.queue.done
		s.closeConn()
		if s.ownDB {
			if err := s.db.Close(); err != nil {
				s.closeErr = fmt.Errorf("dedupe: sqlite: close: %w", err)
			}
		}
	})
	return s.closeErr
}
