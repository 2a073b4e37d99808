package dedupe

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite"
)

// Defaults of [SQLiteConfig].
const (
	// DefaultSQLiteTable is the marks table of the NekoBot gateway, the default
	// [SQLiteConfig.Table].
	DefaultSQLiteTable = "gateway_dedupe"
	// DefaultSQLiteBusyTimeout is the default [SQLiteConfig.BusyTimeout].
	DefaultSQLiteBusyTimeout = 5 * time.Second
	// DefaultSQLiteCleanupBatch is the default [SQLiteConfig.CleanupBatch].
	DefaultSQLiteCleanupBatch = 1000
)

// SQLiteConfig configures a [SQLiteStore]. The zero value gives the defaults.
type SQLiteConfig struct {
	// TTL is how long a mark lasts when Mark is given ttl <= 0. Default 24 h
	// ([DefaultTTL]).
	TTL time.Duration
	// Lease is how long a claim lasts when Claim or Extend is given lease <= 0.
	// Default 5 min ([DefaultLease]).
	Lease time.Duration
	// Table is the marks table, NekoBot's gateway_dedupe by default
	// ([DefaultSQLiteTable]). Claims are kept in a table of their own named
	// Table+"_claims". The name must match [A-Za-z_][A-Za-z0-9_]*, be at most 64
	// bytes and not start with "sqlite_".
	Table string
	// Location is the time zone of the naive timestamps in the marks table.
	// Default time.Local, as NekoBot writes them; set it to the zone of the
	// NekoBot process that shares the file.
	Location *time.Location
	// Now is the store's clock. Default time.Now.
	Now func() time.Time
	// CleanupInterval, when > 0, starts a background goroutine that calls
	// [SQLiteStore.CleanupExpired] at this interval; Close stops it and waits for
	// it. Default 0: no sweeper, expired rows stay until CleanupExpired is called
	// (they are absent to every method all the same).
	CleanupInterval time.Duration
	// Synchronous is SQLite's synchronous setting for the store's writes:
	// "FULL" (default) makes every write durable against power loss before the
	// call returns; "NORMAL" keeps it durable against a crash of the process
	// but a power loss may undo the last writes. The case is ignored.
	Synchronous string
	// BusyTimeout bounds how long a write waits for another connection or
	// process holding the database's write lock before it fails. Default 5 s
	// ([DefaultSQLiteBusyTimeout]).
	BusyTimeout time.Duration
	// CleanupBatch bounds the rows of each table that one transaction of
	// CleanupExpired deletes, so that writers are never blocked for long.
	// Default 1000 ([DefaultSQLiteCleanupBatch]).
	CleanupBatch int
}

// SQLiteStore is a [Store] in a SQLite database file, so that marks survive a
// restart of the process and are shared by every process that opens the file.
// It runs on modernc.org/sqlite (no cgo).
//
// # NekoBot compatibility
//
// Marks live in the NekoBot gateway's table, gateway_dedupe(dedupe_key TEXT
// PRIMARY KEY, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at
// TEXT NOT NULL, expires_at TEXT) with index idx_gateway_dedupe_expires, created
// if missing, so a Go gateway and a NekoBot process can share one file and see
// each other's marks. Timestamps are written as NekoBot writes them: naive
// ISO-8601 in [SQLiteConfig.Location] with microseconds, which are left out
// when zero ("2026-11-29T20:28:32.891874", "2026-11-29T20:28:32"). The store
// reads that form, the same with a space for the 'T', RFC 3339 with "Z" or an
// offset, and NULL; a NULL or unreadable expires_at is present forever, as in
// NekoBot. Re-marking updates only expires_at, as NekoBot's upsert does.
// Claims, which NekoBot does not know, live in a table of their own
// (Table+"_claims", expiry in Unix nanoseconds), so NekoBot reads every mark
// correctly.
//
// An entry expires when the clock reaches its expiry ([Store] contract);
// NekoBot still counts it at that very microsecond. Naive local timestamps
// repeat during the hour a daylight-saving zone falls back, for this store as
// for NekoBot; a zone without daylight saving (or UTC) avoids that.
//
// # Durability and concurrency
//
// [OpenSQLite] puts the file in WAL mode, so readers never wait for the writer
// and Exists stays a primary-key lookup. All writes of a store go through one
// goroutine that batches the calls waiting at that moment into one
// transaction (group commit): each call still returns only after its own write
// is committed, and gets its own result; a failing call does not fail the
// others in its transaction. Writes begin with BEGIN IMMEDIATE, so Claim is
// atomic across processes sharing the file, and wait for another process's
// lock up to [SQLiteConfig.BusyTimeout].
//
// A SQLiteStore is safe for concurrent use.
type SQLiteStore struct {
	db       *sql.DB
	ownDB    bool
	ttl      time.Duration
	lease    time.Duration
	loc      *time.Location
	now      func() time.Time
	busy     time.Duration
	batch    int
	marks    string // quoted identifiers
	claims   string
	existsQ  *sql.Stmt
	w        *sqliteWriter
	tokenPre string
	tokenSeq atomic.Uint64

	mu     sync.Mutex
	queue  []*sqliteOp
	spare  []*sqliteOp
	closed bool

	isClosed    atomic.Bool
	wake        chan struct{}
	quit        chan struct{}
	writerDone  chan struct{}
	stopSweep   context.CancelFunc
	sweeperDone chan struct{}
	closeOnce   sync.Once
	closeErr    error
}

// sqliteWriter is the connection all writes of a store go through, owned by
// the writer goroutine once the store is running.
type sqliteWriter struct {
	conn                              *sql.Conn
	restore                           []string // pragmas that give a caller's connection back as it was
	begin, commit, rollback           *sql.Stmt
	savepoint, release, rollbackTo    *sql.Stmt
	markGet, markUpsert, claimDelete  *sql.Stmt
	claimTake, claimExtend, claimDrop *sql.Stmt
	cleanClaims, cleanMarks           *sql.Stmt
	cleanScan, cleanMark              *sql.Stmt
}

// sqliteOp is one write waiting for, or done by, the writer goroutine.
type sqliteOp struct {
	kind  sqliteOpKind
	state atomic.Int32
	done  chan struct{}

	key   Key
	d     time.Duration // ttl or lease
	token string
	cur   sqliteCursor // cleanup: where the scan of marks resumes

	// Results, valid once done is closed.
	status   Status
	n        int64
	finished bool
	err      error
}

type sqliteOpKind uint8

const (
	sqliteMark sqliteOpKind = iota + 1
	sqliteClaim
	sqliteExtend
	sqliteRelease
	sqliteCleanup
)

// States of a sqliteOp.
const (
	opQueued int32 = iota
	opRunning
	opCancelled
)

// sqliteCursor is a position in the expires_at index of the marks table.
type sqliteCursor struct {
	expires string
	rowid   int64
}

const (
	sqliteMaxBatch     = 128                    // operations per group-commit transaction
	sqliteBusySlice    = 100 * time.Millisecond // SQLite's own busy wait per attempt
	sqliteMaxTableLen  = 64
	sqliteMaxTokenLen  = 128
	sqliteMaxReadConns = 8
)

// OpenSQLite opens the SQLite database at path, creating the file if it is
// missing (its directory must exist), puts it in WAL mode, creates the marks
// and claims tables if they are missing, and returns a store using them. The
// store owns the database: Close closes it. path is a file name, taken
// literally; "", ":memory:" and "file:" URIs are refused.
//
// WAL mode lets the store's readers run while it writes and makes each commit
// one append to the -wal file. It is persistent, and transparent to other
// programs on the same host (Python's sqlite3, NekoBot included), which need
// write access to the directory for the -wal and -shm files; it does not work
// on a network file system.
//
// It returns an error, and changes nothing in the file, for a path that is not
// a SQLite database, a read-only file or directory, a marks or claims table of
// an incompatible shape, a database locked by another process for longer than
// the busy timeout, or an invalid cfg.
func OpenSQLite(path string, cfg SQLiteConfig) (*SQLiteStore, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if path == "" || path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil, fmt.Errorf("dedupe: open sqlite %q: want the path of a database file", path)
	}
	dir := filepath.Dir(path)
	if fi, err := os.Stat(dir); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("dedupe: open sqlite %s: directory %s does not exist", path, dir)
		}
		return nil, fmt.Errorf("dedupe: open sqlite %s: %w", path, err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("dedupe: open sqlite %s: %s is not a directory", path, dir)
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("dedupe: open sqlite %s: is a directory", path)
	}
	// A file: URI, so that no character of path is taken for a query.
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(filepath.ToSlash(path))
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(%d)&_pragma=synchronous(%s)",
		esc, sqliteBusySlice.Milliseconds(), cfg.Synchronous)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("dedupe: open sqlite %s: %w", path, err)
	}
	db.SetMaxOpenConns(sqliteMaxReadConns + 1)
	db.SetMaxIdleConns(sqliteMaxReadConns + 1)
	s, err := newSQLiteStore(db, cfg, true)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("dedupe: open sqlite %s: %w", path, err)
	}
	return s, nil
}

// NewSQLiteStore returns a store on db, an open SQLite database (the
// "sqlite" driver of modernc.org/sqlite) that the caller owns: Close leaves it
// open. It creates the marks and claims tables if they are missing, and takes
// one connection of db for the store's writes until Close, so db must allow at
// least two open connections; the busy timeout and synchronous setting the
// store gives that connection are restored by Close. Unlike [OpenSQLite] it
// leaves the journal mode of the database as it is: set WAL yourself (the DSN
// parameter "_pragma=journal_mode(WAL)") to let readers run while the store
// writes, and a busy timeout ("_pragma=busy_timeout(5000)") for your own
// connections. In a rollback journal, Exists retries a read that finds the
// database busy for up to [SQLiteConfig.BusyTimeout].
func NewSQLiteStore(db *sql.DB, cfg SQLiteConfig) (*SQLiteStore, error) {
	if db == nil {
		return nil, errors.New("dedupe: sqlite: nil *sql.DB")
	}
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	if n := db.Stats().MaxOpenConnections; n == 1 {
		return nil, errors.New("dedupe: sqlite: the *sql.DB allows one open connection; the store needs one for its writes and more for reads")
	}
	return newSQLiteStore(db, cfg, false)
}

func (cfg *SQLiteConfig) normalize() error {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Table == "" {
		cfg.Table = DefaultSQLiteTable
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
	if cfg.CleanupInterval < 0 {
		return fmt.Errorf("dedupe: sqlite: negative CleanupInterval %v", cfg.CleanupInterval)
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
	if cfg.BusyTimeout == 0 {
		cfg.BusyTimeout = DefaultSQLiteBusyTimeout
	}
	if cfg.CleanupBatch < 0 {
		return fmt.Errorf("dedupe: sqlite: negative CleanupBatch %d", cfg.CleanupBatch)
	}
	if cfg.CleanupBatch == 0 {
		cfg.CleanupBatch = DefaultSQLiteCleanupBatch
	}
	return nil
}

func checkSQLiteTable(name string) error {
	bad := len(name) > sqliteMaxTableLen || strings.HasPrefix(strings.ToLower(name), "sqlite_")
	for i := 0; i < len(name) && !bad; i++ {
		c := name[i]
		bad = !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9')
	}
	if bad {
		return fmt.Errorf("dedupe: sqlite: table name %q: want [A-Za-z_][A-Za-z0-9_]*, at most %d bytes, not starting with sqlite_", name, sqliteMaxTableLen)
	}
	return nil
}

func newSQLiteStore(db *sql.DB, cfg SQLiteConfig, own bool) (*SQLiteStore, error) {
	var pre [8]byte
	if _, err := rand.Read(pre[:]); err != nil {
		return nil, fmt.Errorf("dedupe: sqlite: token prefix: %w", err)
	}
	s := &SQLiteStore{
		db:       db,
		ownDB:    own,
		ttl:      cfg.TTL,
		lease:    cfg.Lease,
		loc:      cfg.Location,
		now:      cfg.Now,
		busy:     cfg.BusyTimeout,
		batch:    cfg.CleanupBatch,
		marks:    `"` + cfg.Table + `"`,
		claims:   `"` + cfg.Table + `_claims"`,
		tokenPre: hex.EncodeToString(pre[:]),
		wake:     make(chan struct{}, 1),
		quit:     make(chan struct{}),
	}
	ctx := context.Background()
	var conn *sql.Conn
	if err := s.retryBusy(func() (err error) {
		conn, err = db.Conn(ctx)
		return err
	}); err != nil {
		return nil, sqliteError("connect", err, s.busy)
	}
	s.w = &sqliteWriter{conn: conn}
	if err := s.setup(ctx, cfg, own); err != nil {
		s.w.close()
		return nil, err
	}
	s.writerDone = make(chan struct{})
	go s.writer()
	if cfg.CleanupInterval > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		s.stopSweep = cancel
		s.sweeperDone = make(chan struct{})
		go s.sweep(ctx, cfg.CleanupInterval)
	}
	return s, nil
}

// setup configures the writer connection, creates or checks the tables and
// prepares the statements.
func (s *SQLiteStore) setup(ctx context.Context, cfg SQLiteConfig, own bool) error {
	c := s.w.conn
	if !own {
		var busy int64
		var sync int
		if err := c.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&busy); err != nil {
			return sqliteError("configure", err, s.busy)
		}
		if err := c.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync); err != nil {
			return sqliteError("configure", err, s.busy)
		}
		s.w.restore = []string{fmt.Sprintf("PRAGMA busy_timeout = %d", busy), fmt.Sprintf("PRAGMA synchronous = %d", sync)}
	}
	for _, p := range []string{
		fmt.Sprintf("PRAGMA busy_timeout = %d", min(s.busy, sqliteBusySlice).Milliseconds()),
		"PRAGMA synchronous = " + cfg.Synchronous,
	} {
		if _, err := c.ExecContext(ctx, p); err != nil {
			return sqliteError("configure", err, s.busy)
		}
	}
	// Reading the schema first gives a clear error for a file that is not a
	// database before anything tries to write to it.
	var n int
	if err := s.retryBusy(func() error {
		return c.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n)
	}); err != nil {
		return sqliteError("read schema", err, s.busy)
	}
	// Refuse incompatible tables before changing anything, the journal mode
	// included; createTables checks again under the write lock.
	for _, t := range []struct {
		name  string
		shape []sqliteColumn
		rowid bool
	}{{cfg.Table, sqliteMarksShape, true}, {cfg.Table + "_claims", sqliteClaimsShape, false}} {
		if err := s.retryBusy(func() error {
			_, err := s.checkTable(ctx, t.name, t.shape, t.rowid)
			return err
		}); err != nil {
			return err
		}
	}
	if own {
		if err := s.setWAL(ctx); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		stmt **sql.Stmt
		q    string
	}{
		{&s.w.begin, "BEGIN IMMEDIATE"},
		{&s.w.commit, "COMMIT"},
		{&s.w.rollback, "ROLLBACK"},
	} {
		if err := s.retryBusy(func() (err error) {
			*p.stmt, err = c.PrepareContext(ctx, p.q)
			return err
		}); err != nil {
			return sqliteError("prepare", err, s.busy)
		}
	}
	if err := s.beginWithRetry(nil); err != nil {
		return sqliteError("create tables", err, s.busy)
	}
	if err := s.createTables(ctx, cfg.Table); err != nil {
		_, _ = s.w.rollback.ExecContext(ctx)
		return err
	}
	if err := s.commitWithRetry(ctx); err != nil {
		_, _ = s.w.rollback.ExecContext(ctx)
		return sqliteError("create tables", err, s.busy)
	}
	return s.prepare(ctx)
}

func (s *SQLiteStore) setWAL(ctx context.Context) error {
	var mode string
	if err := s.retryBusy(func() error {
		return s.w.conn.QueryRowContext(ctx, "PRAGMA journal_mode = WAL").Scan(&mode)
	}); err != nil {
		return sqliteError("set WAL mode", err, s.busy)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("dedupe: sqlite: cannot switch to WAL mode, journal mode is %q", mode)
	}
	return nil
}

// retryBusy calls f until it succeeds, fails otherwise than with a busy
// database, or the busy timeout has passed.
func (s *SQLiteStore) retryBusy(f func() error) error {
	deadline := time.Now().Add(s.busy)
	for attempt := 1; ; attempt++ {
		err := f()
		if err == nil || !isSQLiteBusy(err) || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(time.Duration(min(attempt, 10)) * time.Millisecond)
	}
}

func (s *SQLiteStore) createTables(ctx context.Context, table string) error {
	c := s.w.conn
	exists, err := s.checkTable(ctx, table, sqliteMarksShape, true)
	if err != nil {
		return err
	}
	stmts := []string{}
	if !exists {
		stmts = append(stmts, "CREATE TABLE "+s.marks+` (
    dedupe_key TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT
)`)
	}
	stmts = append(stmts, `CREATE INDEX IF NOT EXISTS "idx_`+table+`_expires" ON `+s.marks+"(expires_at)")
	exists, err = s.checkTable(ctx, table+"_claims", sqliteClaimsShape, false)
	if err != nil {
		return err
	}
	if !exists {
		stmts = append(stmts, "CREATE TABLE "+s.claims+` (
    dedupe_key TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID`)
	}
	stmts = append(stmts, `CREATE INDEX IF NOT EXISTS "idx_`+table+`_claims_expires" ON `+s.claims+"(expires_at)",
		// A write undone at once, so that a database this process may read but
		// not write is refused now rather than at the first Mark.
		"SAVEPOINT dedupe_probe",
		"INSERT INTO "+s.claims+" (dedupe_key, token, expires_at) VALUES ('', '', 0) ON CONFLICT(dedupe_key) DO NOTHING",
		"ROLLBACK TO dedupe_probe",
		"RELEASE dedupe_probe")
	for _, q := range stmts {
		if _, err := c.ExecContext(ctx, q); err != nil {
			return sqliteError("create tables", err, s.busy)
		}
	}
	return nil
}

// sqliteColumn is a column a table of the store must have.
type sqliteColumn struct {
	name     string
	affinity string // "TEXT" or "INTEGER"
}

var (
	sqliteMarksShape = []sqliteColumn{
		{"dedupe_key", "TEXT"}, {"channel_id", "TEXT"}, {"message_id", "TEXT"},
		{"created_at", "TEXT"}, {"expires_at", "TEXT"},
	}
	sqliteClaimsShape = []sqliteColumn{
		{"dedupe_key", "TEXT"}, {"token", "TEXT"}, {"expires_at", "INTEGER"},
	}
)

// checkTable reports whether table exists, and an error if it exists with a
// shape the store cannot use: want's columns (the first the sole primary key),
// and no other column that an insert must fill. The marks table must have a
// rowid, which CleanupExpired pages by.
func (s *SQLiteStore) checkTable(ctx context.Context, table string, want []sqliteColumn, rowid bool) (bool, error) {
	c := s.w.conn
	var typ string
	err := c.QueryRowContext(ctx, "SELECT type FROM sqlite_schema WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')", table).Scan(&typ)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, sqliteError("read schema", err, s.busy)
	}
	incompatible := func(format string, args ...any) error {
		return fmt.Errorf("dedupe: sqlite: table %s has an incompatible shape: %s", table, fmt.Sprintf(format, args...))
	}
	if typ != "table" {
		return true, incompatible("it is a %s", typ)
	}
	rows, err := c.QueryContext(ctx, `SELECT name, type, "notnull", dflt_value IS NOT NULL, pk FROM pragma_table_info(?)`, table)
	if err != nil {
		return true, sqliteError("read schema", err, s.busy)
	}
	type column struct {
		typ             string
		notNull, hasDef bool
		pk              int
	}
	cols := map[string]column{}
	for rows.Next() {
		var name string
		var col column
		if err := rows.Scan(&name, &col.typ, &col.notNull, &col.hasDef, &col.pk); err != nil {
			rows.Close()
			return true, sqliteError("read schema", err, s.busy)
		}
		cols[strings.ToLower(name)] = col
	}
	if err := rows.Err(); err != nil {
		return true, sqliteError("read schema", err, s.busy)
	}
	rows.Close()
	for i, w := range want {
		col, ok := cols[w.name]
		if !ok {
			return true, incompatible("no column %s", w.name)
		}
		if a := sqliteAffinity(col.typ); a != w.affinity {
			return true, incompatible("column %s is %q (%s affinity), want %s", w.name, col.typ, a, w.affinity)
		}
		if i == 0 && col.pk != 1 {
			return true, incompatible("column %s is not the primary key", w.name)
		}
		if i > 0 && col.pk != 0 {
			return true, incompatible("column %s is part of the primary key", w.name)
		}
		delete(cols, w.name)
	}
	for name, col := range cols {
		if col.pk > 0 {
			return true, incompatible("column %s is part of the primary key", name)
		}
		if col.notNull && !col.hasDef {
			return true, incompatible("column %s is NOT NULL without a default", name)
		}
	}
	if rowid {
		if _, err := c.ExecContext(ctx, "SELECT rowid FROM "+`"`+table+`"`+" LIMIT 0"); err != nil {
			return true, incompatible("it has no rowid")
		}
	}
	return true, nil
}

// sqliteAffinity returns the affinity of a declared column type, by SQLite's
// rules (https://www.sqlite.org/datatype3.html#determination_of_column_affinity).
func sqliteAffinity(decl string) string {
	d := strings.ToUpper(decl)
	switch {
	case strings.Contains(d, "INT"):
		return "INTEGER"
	case strings.Contains(d, "CHAR"), strings.Contains(d, "CLOB"), strings.Contains(d, "TEXT"):
		return "TEXT"
	case d == "" || strings.Contains(d, "BLOB"):
		return "BLOB"
	case strings.Contains(d, "REAL"), strings.Contains(d, "FLOA"), strings.Contains(d, "DOUB"):
		return "REAL"
	}
	return "NUMERIC"
}

func (s *SQLiteStore) prepare(ctx context.Context) error {
	w, c := s.w, s.w.conn
	for _, p := range []struct {
		stmt **sql.Stmt
		q    string
	}{
		{&w.savepoint, "SAVEPOINT dedupe_op"},
		{&w.release, "RELEASE dedupe_op"},
		{&w.rollbackTo, "ROLLBACK TO dedupe_op"},
		{&w.markGet, "SELECT expires_at FROM " + s.marks + " WHERE dedupe_key = ?"},
		{&w.markUpsert, "INSERT INTO " + s.marks + " (dedupe_key, channel_id, message_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?) " +
			"ON CONFLICT(dedupe_key) DO UPDATE SET expires_at = excluded.expires_at"},
		{&w.claimDelete, "DELETE FROM " + s.claims + " WHERE dedupe_key = ?"},
		// Takes the key unless an unexpired claim with another token holds it:
		// one row changed means Claimed.
		{&w.claimTake, "INSERT INTO " + s.claims + " (dedupe_key, token, expires_at) VALUES (?1, ?2, ?3) " +
			"ON CONFLICT(dedupe_key) DO UPDATE SET token = excluded.token, expires_at = excluded.expires_at WHERE expires_at <= ?4 OR token = ?2"},
		{&w.claimExtend, "UPDATE " + s.claims + " SET expires_at = ?1 WHERE dedupe_key = ?2 AND token = ?3 AND expires_at > ?4"},
		{&w.claimDrop, "DELETE FROM " + s.claims + " WHERE dedupe_key = ?1 AND token = ?2 AND expires_at > ?3"},
		{&w.cleanClaims, "DELETE FROM " + s.claims + " WHERE dedupe_key IN (SELECT dedupe_key FROM " + s.claims + " WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)"},
		// Marks in the store's own format, whose text sorts as their time.
		{&w.cleanMarks, "DELETE FROM " + s.marks + " WHERE rowid IN (SELECT rowid FROM " + s.marks +
			" WHERE expires_at <= ?1 AND " + sqliteOwnFormat + " ORDER BY expires_at LIMIT ?2)"},
		// Marks in any other format, parsed one by one.
		{&w.cleanScan, "SELECT rowid, expires_at FROM " + s.marks + " WHERE expires_at <= ?1 AND (expires_at, rowid) > (?2, ?3) AND NOT " +
			sqliteOwnFormat + " ORDER BY expires_at, rowid LIMIT ?4"},
		{&w.cleanMark, "DELETE FROM " + s.marks + " WHERE rowid = ?"},
	} {
		if err := s.retryBusy(func() (err error) {
			*p.stmt, err = c.PrepareContext(ctx, p.q)
			return err
		}); err != nil {
			return sqliteError("prepare", err, s.busy)
		}
	}
	if err := s.retryBusy(func() (err error) {
		s.existsQ, err = s.db.PrepareContext(ctx, "SELECT expires_at FROM "+s.marks+" WHERE dedupe_key = ?")
		return err
	}); err != nil {
		return sqliteError("prepare", err, s.busy)
	}
	return nil
}

func (w *sqliteWriter) close() {
	for _, st := range []*sql.Stmt{
		w.begin, w.commit, w.rollback, w.savepoint, w.release, w.rollbackTo,
		w.markGet, w.markUpsert, w.claimDelete, w.claimTake, w.claimExtend, w.claimDrop,
		w.cleanClaims, w.cleanMarks, w.cleanScan, w.cleanMark,
	} {
		if st != nil {
			_ = st.Close()
		}
	}
	for _, p := range w.restore {
		_, _ = w.conn.ExecContext(context.Background(), p)
	}
	_ = w.conn.Close()
}

// Backend returns "sqlite".
func (s *SQLiteStore) Backend() string { return "sqlite" }

func (s *SQLiteStore) defaultTTL() time.Duration { return s.ttl }

// check returns the error a call with key should fail with, if any.
func (s *SQLiteStore) check(ctx context.Context, key Key) error {
	if s.isClosed.Load() {
		return ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return key.Validate()
}

// Exists reports whether key is marked and unexpired. It reads the database
// without waiting for writes in progress (in WAL mode), by primary key.
func (s *SQLiteStore) Exists(ctx context.Context, key Key) (bool, error) {
	if err := s.check(ctx, key); err != nil {
		return false, err
	}
	var exp sql.NullString
	dkey := key.String()
	deadline := time.Time{}
	for attempt := 0; ; attempt++ {
		err := s.existsQ.QueryRowContext(ctx, dkey).Scan(&exp)
		if err == nil {
			break
		}
		if errors.Is(err, sql.ErrNoRows) {
			return false, nil
		}
		if s.isClosed.Load() {
			return false, ErrClosed
		}
		if cerr := ctx.Err(); cerr != nil {
			return false, cerr
		}
		// In WAL mode a read is busy only in rare moments (recovery); in a
		// rollback journal it is while another process commits.
		if !isSQLiteBusy(err) {
			return false, sqliteError("exists", err, s.busy)
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(s.busy)
		} else if time.Now().After(deadline) {
			return false, sqliteError("exists", err, s.busy)
		}
		if err := sleepCtx(ctx, time.Duration(min(attempt+1, 20))*time.Millisecond); err != nil {
			return false, err
		}
	}
	return sqliteLive(exp, s.now(), s.loc), nil
}

// Mark records key as processed for ttl (ttl <= 0: the configured TTL),
// replacing the expiry of an earlier mark and dropping any claim on key, in one
// transaction. It returns once the mark is committed.
func (s *SQLiteStore) Mark(ctx context.Context, key Key, ttl time.Duration) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	if ttl <= 0 {
		ttl = s.ttl
	}
	op := &sqliteOp{kind: sqliteMark, key: key, d: ttl}
	return s.submit(ctx, op)
}

// Claim takes c.Key for c.Token, for lease (lease <= 0: the configured lease),
// unless it is marked, by this store or by NekoBot, or a claim with another
// token holds it. See [Store.Claim]. It is atomic across processes sharing the
// file.
func (s *SQLiteStore) Claim(ctx context.Context, c Claim, lease time.Duration) (Status, error) {
	if err := s.check(ctx, c.Key); err != nil {
		return 0, err
	}
	if err := c.Validate(); err != nil {
		return 0, err
	}
	if lease <= 0 {
		lease = s.lease
	}
	op := &sqliteOp{kind: sqliteClaim, key: c.Key, token: c.Token, d: lease}
	if err := s.submit(ctx, op); err != nil {
		return 0, err
	}
	return op.status, nil
}

// Extend renews the lease of c to lease from now (lease <= 0: the configured
// lease) if c still holds its key, and otherwise returns [ErrNotOwner].
func (s *SQLiteStore) Extend(ctx context.Context, c Claim, lease time.Duration) error {
	if err := s.checkClaim(ctx, c); err != nil {
		return err
	}
	if lease <= 0 {
		lease = s.lease
	}
	return s.submit(ctx, &sqliteOp{kind: sqliteExtend, key: c.Key, token: c.Token, d: lease})
}

// Release drops c's claim if c still holds its key, and otherwise returns
// [ErrNotOwner].
func (s *SQLiteStore) Release(ctx context.Context, c Claim) error {
	if err := s.checkClaim(ctx, c); err != nil {
		return err
	}
	return s.submit(ctx, &sqliteOp{kind: sqliteRelease, key: c.Key, token: c.Token})
}

func (s *SQLiteStore) checkClaim(ctx context.Context, c Claim) error {
	if err := s.check(ctx, c.Key); err != nil {
		return err
	}
	if !validToken(c.Token) {
		return fmt.Errorf("%w: %s: not a claim this store made", ErrNotOwner, c.Key)
	}
	return nil
}

// CleanupExpired deletes expired marks and claims and returns how many rows it
// deleted. It works in transactions of at most [SQLiteConfig.CleanupBatch] rows
// per table, so other writers wait at most for one of them, and stops early,
// returning the count so far, when ctx is done.
//
// Marks whose expires_at is NULL or unreadable are kept (they are present
// forever). A mark written by another program with an RFC 3339 offset may be
// deleted some hours after it expired, once its text sorts before the current
// local time; it is absent to every method from its expiry all the same.
func (s *SQLiteStore) CleanupExpired(ctx context.Context) (int64, error) {
	if s.isClosed.Load() {
		return 0, ErrClosed
	}
	var total int64
	cur := sqliteCursor{rowid: -1 << 63}
	for {
		if err := ctx.Err(); err != nil {
			return total, err
		}
		op := &sqliteOp{kind: sqliteCleanup, cur: cur}
		if err := s.submit(ctx, op); err != nil {
			return total, err
		}
		total += op.n
		if op.finished {
			return total, nil
		}
		cur = op.cur
	}
}

// Close stops the background sweeper and the writer, after the writes already
// queued are done, and closes the database if [OpenSQLite] opened it. Later
// calls return [ErrClosed]. Close is idempotent.
func (s *SQLiteStore) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.isClosed.Store(true)
		s.mu.Unlock()
		if s.stopSweep != nil {
			s.stopSweep()
			<-s.sweeperDone
		}
		close(s.quit)
		<-s.writerDone
		_ = s.existsQ.Close()
		s.w.close()
		if s.ownDB {
			s.closeErr = s.db.Close()
			if s.closeErr != nil {
				s.closeErr = fmt.Errorf("dedupe: sqlite: close: %w", s.closeErr)
			}
		}
	})
	return s.closeErr
}

// submit queues op for the writer and waits for its result. A call whose
// context ends while op is still queued returns the context's error and op
// never runs; once the writer has started op, submit waits for its outcome,
// so an error always means that nothing was written.
func (s *SQLiteStore) submit(ctx context.Context, op *sqliteOp) error {
	op.done = make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, op)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case <-op.done:
	case <-ctx.Done():
		if op.state.CompareAndSwap(opQueued, opCancelled) {
			return ctx.Err()
		}
		<-op.done
	}
	return op.err
}

// writer runs every write of the store, batching the operations queued while
// the previous transaction committed into the next one.
func (s *SQLiteStore) writer() {
	defer close(s.writerDone)
	for {
		select {
		case <-s.wake:
		case <-s.quit:
			// Close refuses new operations; finish those already queued.
			s.drain()
			return
		}
		s.drain()
	}
}

func (s *SQLiteStore) drain() {
	for {
		// Only the writer touches spare: the queue's previous backing array.
		s.mu.Lock()
		ops := s.queue
		s.queue = s.spare[:0]
		s.mu.Unlock()
		if len(ops) == 0 {
			s.spare = ops
			return
		}
		for rest := ops; len(rest) > 0; {
			n := min(len(rest), sqliteMaxBatch)
			s.runBatch(rest[:n])
			rest = rest[n:]
		}
		clear(ops)
		s.spare = ops[:0]
	}
}

// runBatch runs ops in one transaction and reports each its result once the
// transaction committed.
func (s *SQLiteStore) runBatch(ops []*sqliteOp) {
	ctx := context.Background()
	w := s.w
	if err := s.beginWithRetry(ops); err != nil {
		err = sqliteError("begin", err, s.busy)
		for _, op := range ops {
			if op.state.CompareAndSwap(opQueued, opRunning) {
				op.err = err
				close(op.done)
			}
		}
		return
	}
	now := s.now()
	running := ops[:0:0]
	var lost error // the transaction was rolled back under us
	for _, op := range ops {
		if !op.state.CompareAndSwap(opQueued, opRunning) {
			continue // cancelled while queued
		}
		running = append(running, op)
		if lost != nil {
			continue
		}
		if err := s.apply(ctx, op, now); err != nil {
			op.err = err
			if errors.Is(err, errSQLiteTxLost) {
				lost = err
			}
		}
	}
	if lost == nil {
		if err := s.commitWithRetry(ctx); err != nil {
			lost = sqliteError("commit", err, s.busy)
		}
	}
	if lost != nil {
		_, _ = w.rollback.ExecContext(ctx)
		for _, op := range running {
			op.status, op.token, op.n, op.finished = 0, "", 0, false
			op.err = lost
		}
	}
	for _, op := range running {
		close(op.done)
	}
}

// errSQLiteTxLost marks an error after which SQLite rolled back the whole
// transaction.
var errSQLiteTxLost = errors.New("dedupe: sqlite: transaction rolled back")

func (s *SQLiteStore) beginWithRetry(ops []*sqliteOp) error {
	ctx := context.Background()
	deadline := time.Now().Add(s.busy)
	for attempt := 1; ; attempt++ {
		_, err := s.w.begin.ExecContext(ctx)
		if err == nil {
			return nil
		}
		// The connection's own busy timeout waited up to sqliteBusySlice;
		// retry, within the store's busy timeout, unless every caller gave up.
		if !isSQLiteBusy(err) || !time.Now().Before(deadline) || ops != nil && allCancelled(ops) {
			return err
		}
		time.Sleep(time.Duration(min(attempt, 10)) * time.Millisecond)
	}
}

func (s *SQLiteStore) commitWithRetry(ctx context.Context) error {
	deadline := time.Now().Add(s.busy)
	for attempt := 1; ; attempt++ {
		_, err := s.w.commit.ExecContext(ctx)
		// A busy COMMIT (readers of a rollback journal) leaves the transaction open.
		if err == nil || !isSQLiteBusy(err) || !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(time.Duration(min(attempt, 10)) * time.Millisecond)
	}
}

func allCancelled(ops []*sqliteOp) bool {
	for _, op := range ops {
		if op.state.Load() == opQueued {
			return false
		}
	}
	return true
}

// apply runs op inside the open transaction. An operation of several writes
// runs in a savepoint, so that it takes effect whole or not at all.
func (s *SQLiteStore) apply(ctx context.Context, op *sqliteOp, now time.Time) error {
	w := s.w
	switch op.kind {
	case sqliteMark, sqliteCleanup:
		if _, err := w.savepoint.ExecContext(ctx); err != nil {
			return txErr("savepoint", err, s.busy)
		}
		var err error
		if op.kind == sqliteMark {
			err = s.applyMark(ctx, op, now)
		} else {
			err = s.applyCleanup(ctx, op, now)
		}
		if err != nil {
			if _, rerr := w.rollbackTo.ExecContext(ctx); rerr != nil {
				return fmt.Errorf("%w: %w", errSQLiteTxLost, err)
			}
		}
		if _, rerr := w.release.ExecContext(ctx); rerr != nil {
			return fmt.Errorf("%w: %w", errSQLiteTxLost, sqliteError("release savepoint", rerr, s.busy))
		}
		return err
	case sqliteClaim:
		return s.applyClaim(ctx, op, now)
	case sqliteExtend, sqliteRelease:
		return s.applyOwned(ctx, op, now)
	}
	return fmt.Errorf("dedupe: sqlite: unknown operation %d", op.kind)
}

func txErr(what string, err error, busy time.Duration) error {
	return fmt.Errorf("%w: %w", errSQLiteTxLost, sqliteError(what, err, busy))
}

func (s *SQLiteStore) applyMark(ctx context.Context, op *sqliteOp, now time.Time) error {
	w := s.w
	dkey := op.key.String()
	if _, err := w.claimDelete.ExecContext(ctx, dkey); err != nil {
		return sqliteError("mark", err, s.busy)
	}
	created := formatSQLiteTime(now, s.loc)
	expires := formatSQLiteTime(now.Add(op.d), s.loc)
	if _, err := w.markUpsert.ExecContext(ctx, dkey, op.key.Channel, op.key.MessageID, created, expires); err != nil {
		return sqliteError("mark", err, s.busy)
	}
	return nil
}

// marked reports whether dkey has an unexpired mark.
func (s *SQLiteStore) marked(ctx context.Context, dkey string, now time.Time) (bool, error) {
	var exp sql.NullString
	err := s.w.markGet.QueryRowContext(ctx, dkey).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return sqliteLive(exp, now, s.loc), nil
}

func (s *SQLiteStore) applyClaim(ctx context.Context, op *sqliteOp, now time.Time) error {
	dkey := op.key.String()
	dup, err := s.marked(ctx, dkey, now)
	if err != nil {
		return sqliteError("claim", err, s.busy)
	}
	if dup {
		op.status = Duplicate
		return nil
	}
	res, err := s.w.claimTake.ExecContext(ctx, dkey, op.token, now.Add(op.d).UnixNano(), now.UnixNano())
	if err != nil {
		return sqliteError("claim", err, s.busy)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		op.status = Claimed
	} else {
		op.status = InFlight
	}
	return nil
}

func (s *SQLiteStore) applyOwned(ctx context.Context, op *sqliteOp, now time.Time) error {
	what := "release"
	if op.kind == sqliteExtend {
		what = "extend"
	}
	dkey := op.key.String()
	dup, err := s.marked(ctx, dkey, now)
	if err != nil {
		return sqliteError(what, err, s.busy)
	}
	if dup {
		return fmt.Errorf("%w: %s is marked", ErrNotOwner, op.key)
	}
	var res sql.Result
	if op.kind == sqliteExtend {
		res, err = s.w.claimExtend.ExecContext(ctx, now.Add(op.d).UnixNano(), dkey, op.token, now.UnixNano())
	} else {
		res, err = s.w.claimDrop.ExecContext(ctx, dkey, op.token, now.UnixNano())
	}
	if err != nil {
		return sqliteError(what, err, s.busy)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: %s", ErrNotOwner, op.key)
	}
	return nil
}

// sqliteOwnFormat matches the timestamps the store writes, naive ISO-8601 with
// no fraction or six digits of it. For them text order is time order, so SQL
// compares them exactly with the formatted current time.
const sqliteOwnFormat = "(expires_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9]'" +
	" OR expires_at GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T[0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]')"

// applyCleanup deletes up to s.batch expired claims and up to s.batch expired
// marks in the store's own format; once those are gone, it goes on through the
// marks in other formats whose text sorts at or before the current local time
// (which holds every expired row in a naive format), from op.cur on, s.batch
// at a time, parsing each and deleting it if it has expired.
func (s *SQLiteStore) applyCleanup(ctx context.Context, op *sqliteOp, now time.Time) error {
	w := s.w
	nowText := formatSQLiteTime(now, s.loc)
	res, err := w.cleanClaims.ExecContext(ctx, now.UnixNano(), s.batch)
	if err != nil {
		return sqliteError("cleanup", err, s.busy)
	}
	nClaims, _ := res.RowsAffected()
	if res, err = w.cleanMarks.ExecContext(ctx, nowText, s.batch); err != nil {
		return sqliteError("cleanup", err, s.busy)
	}
	nMarks, _ := res.RowsAffected()
	op.n = nClaims + nMarks
	if nClaims == int64(s.batch) || nMarks == int64(s.batch) {
		return nil // more to do
	}
	rows, err := w.cleanScan.QueryContext(ctx, nowText, op.cur.expires, op.cur.rowid, s.batch)
	if err != nil {
		return sqliteError("cleanup", err, s.busy)
	}
	var expired []int64
	scanned := 0
	for rows.Next() {
		var rowid int64
		var exp string
		if err := rows.Scan(&rowid, &exp); err != nil {
			rows.Close()
			return sqliteError("cleanup", err, s.busy)
		}
		scanned++
		op.cur = sqliteCursor{expires: exp, rowid: rowid}
		if t, ok := parseSQLiteTime(exp, s.loc); ok && !now.Before(t) {
			expired = append(expired, rowid)
		}
	}
	if err := rows.Err(); err != nil {
		return sqliteError("cleanup", err, s.busy)
	}
	for _, id := range expired {
		if _, err := w.cleanMark.ExecContext(ctx, id); err != nil {
			return sqliteError("cleanup", err, s.busy)
		}
	}
	op.n += int64(len(expired))
	op.finished = scanned < s.batch
	return nil
}

// sweep calls CleanupExpired every interval until ctx is cancelled.
func (s *SQLiteStore) sweep(ctx context.Context, interval time.Duration) {
	defer close(s.sweeperDone)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			// A failure (a lock held too long, a closed store) is retried at
			// the next tick; expired rows are absent to readers meanwhile.
			_, _ = s.CleanupExpired(ctx)
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SQLite result codes (https://www.sqlite.org/rescode.html), primary part.
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadonly = 8
	sqliteIOErr    = 10
	sqliteCorrupt  = 11
	sqliteFull     = 13
	sqliteCantOpen = 14
	sqliteNotADB   = 26
)

func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

func isSQLiteBusy(err error) bool {
	switch sqliteCode(err) {
	case sqliteBusy, sqliteLocked:
		return true
	case 0:
		msg := err.Error()
		return strings.Contains(msg, "database is locked") || strings.Contains(msg, "database table is locked")
	}
	return false
}

// sqliteError wraps err, from a step of the store, with an explanation of the
// common failures.
func sqliteError(what string, err error, busy time.Duration) error {
	if err == nil {
		return nil
	}
	var hint string
	switch sqliteCode(err) {
	case sqliteBusy, sqliteLocked:
		hint = fmt.Sprintf("database is locked by another connection for longer than the busy timeout (%v)", busy)
	case sqliteReadonly:
		hint = "database is read-only (check the permissions of the file and its directory)"
	case sqliteCantOpen:
		hint = "cannot open the database file or its journal (check that the directory exists and is writable)"
	case sqliteNotADB:
		hint = "file is not a SQLite database"
	case sqliteCorrupt:
		hint = "database file is corrupt"
	case sqliteFull:
		hint = "disk is full"
	case sqliteIOErr:
		hint = "I/O error"
	}
	if hint != "" {
		return fmt.Errorf("dedupe: sqlite: %s: %s: %w", what, hint, err)
	}
	return fmt.Errorf("dedupe: sqlite: %s: %w", what, err)
}

// sqliteLive reports whether a mark with expiry exp is present at now: NULL or
// unreadable text is present forever, as NekoBot reads it.
func sqliteLive(exp sql.NullString, now time.Time, loc *time.Location) bool {
	if !exp.Valid {
		return true
	}
	t, ok := parseSQLiteTime(exp.String, loc)
	return !ok || now.Before(t)
}

// formatSQLiteTime formats t as NekoBot writes timestamps, Python's
// datetime.isoformat of a naive local time: "2006-01-02T15:04:05.000000" in
// loc, without the fraction when the microseconds are zero.
func formatSQLiteTime(t time.Time, loc *time.Location) string {
	t = t.In(loc)
	var b [26]byte
	y, mo, d := t.Date()
	h, mi, sec := t.Clock()
	put := func(i, v, n int) {
		for j := i + n - 1; j >= i; j-- {
			b[j] = byte('0' + v%10)
			v /= 10
		}
	}
	put(0, y, 4)
	b[4] = '-'
	put(5, int(mo), 2)
	b[7] = '-'
	put(8, d, 2)
	b[10] = 'T'
	put(11, h, 2)
	b[13] = ':'
	put(14, mi, 2)
	b[16] = ':'
	put(17, sec, 2)
	us := t.Nanosecond() / 1000
	if us == 0 {
		return string(b[:19])
	}
	b[19] = '.'
	put(20, us, 6)
	return string(b[:])
}

// parseSQLiteTime parses a stored timestamp: "YYYY-MM-DDTHH:MM:SS" (or with a
// space for the 'T'), an optional fraction of 1 to 9 digits, and an optional
// zone, "Z" or "±HH:MM". Without a zone the time is in loc.
func parseSQLiteTime(s string, loc *time.Location) (time.Time, bool) {
	if len(s) < 19 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != ' ') || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	num := func(i, n int) int {
		v := 0
		for j := i; j < i+n; j++ {
			c := s[j]
			if c < '0' || c > '9' {
				return -1
			}
			v = v*10 + int(c-'0')
		}
		return v
	}
	y, mo, d, h, mi, sec := num(0, 4), num(5, 2), num(8, 2), num(11, 2), num(14, 2), num(17, 2)
	if y < 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	rest := s[19:]
	ns := 0
	if len(rest) > 0 && rest[0] == '.' {
		i := 1
		for ; i < len(rest) && '0' <= rest[i] && rest[i] <= '9'; i++ {
			if i <= 9 {
				ns = ns*10 + int(rest[i]-'0')
			}
		}
		if i == 1 || i > 10 {
			return time.Time{}, false
		}
		for k := i; k <= 9; k++ {
			ns *= 10
		}
		rest = rest[i:]
	}
	zone, offset := loc, 0
	switch {
	case rest == "":
	case rest == "Z":
		zone = time.UTC
	case len(rest) == 6 && (rest[0] == '+' || rest[0] == '-') && rest[3] == ':':
		oh, om := num(len(s)-5, 2), num(len(s)-2, 2)
		if oh < 0 || oh > 23 || om < 0 || om > 59 {
			return time.Time{}, false
		}
		offset = (oh*60 + om) * 60
		if rest[0] == '-' {
			offset = -offset
		}
		zone = time.UTC
	default:
		return time.Time{}, false
	}
	t := time.Date(y, time.Month(mo), d, h, mi, sec, ns, zone)
	if t.Day() != d { // February 30th and the like
		return time.Time{}, false
	}
	return t.Add(-time.Duration(offset) * time.Second), true
}
