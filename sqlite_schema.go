package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// sqliteTable is a table of the store: its name, the columns it must have (the
// first the sole primary key), whether it must have a rowid, and how to create
// it when it is missing. Its expiry index is idx_<name>_expires.
type sqliteTable struct {
	name   string
	shape  []sqliteColumn
	rowid  bool
	create string // CREATE TABLE, without the name
}

// sqliteColumn is a column a table of the store must have.
type sqliteColumn struct {
	name     string
	affinity string // "TEXT" or "INTEGER"
}

// tables returns the marks table, NekoBot's, the claims table and the
// results table.
func (s *SQLiteStore) tables() []sqliteTable {
	return []sqliteTable{{
		name: s.table,
		shape: []sqliteColumn{
			{"dedupe_key", "TEXT"}, {"channel_id", "TEXT"}, {"message_id", "TEXT"},
			{"created_at", "TEXT"}, {"expires_at", "TEXT"},
		},
		rowid: true, // CleanupExpired pages by it
		create: ` (
    dedupe_key TEXT PRIMARY KEY,
    channel_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT
)`,
	}, {
		name:  s.table + "_claims",
		shape: []sqliteColumn{{"dedupe_key", "TEXT"}, {"token", "TEXT"}, {"expires_at", "INTEGER"}},
		create: ` (
    dedupe_key TEXT PRIMARY KEY,
    token TEXT NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID`,
	}, {
		// Results kept with marks (Store.MarkResult): expires_at is the text of
		// the mark's expiry when the result was written.
		name:  s.table + "_results",
		shape: []sqliteColumn{{"dedupe_key", "TEXT"}, {"result", "BLOB"}, {"expires_at", "TEXT"}},
		create: ` (
    dedupe_key TEXT PRIMARY KEY,
    result BLOB NOT NULL,
    expires_at TEXT NOT NULL
) WITHOUT ROWID`,
	}}
}

// checkSQLiteTable returns an error if name cannot be [SQLiteConfig.Table].
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

// checkTables returns an error if a table of the store exists with a shape it
// cannot use. It reads the schema first, which gives a clear error for a file
// that is not a database before anything tries to write to it.
func (s *SQLiteStore) checkTables(ctx context.Context) error {
	var n int
	if err := s.retryBusy(ctx, nil, func() error {
		return s.conn.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n)
	}); err != nil {
		return fmt.Errorf("read schema: %w", err)
	}
	for _, t := range s.tables() {
		if err := s.retryBusy(ctx, nil, func() error {
			_, err := s.checkTable(ctx, t)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}

// createTables creates the tables and indexes that are missing, in one
// transaction that first checks the tables again under the write lock, and
// ends by trying a write undone at once: a database this process may read but
// not write is refused now rather than at the first Mark.
func (s *SQLiteStore) createTables(ctx context.Context) error {
	exec := func(q string) error {
		_, err := s.conn.ExecContext(ctx, q)
		return err
	}
	if err := s.retryBusy(ctx, nil, func() error { return exec("BEGIN IMMEDIATE") }); err != nil {
		return fmt.Errorf("create tables: %w", err)
	}
	err := s.createMissing(ctx, exec)
	if err == nil {
		err = s.retryBusy(ctx, nil, func() error { return exec("COMMIT") })
	}
	if err != nil {
		_ = exec("ROLLBACK")
		return fmt.Errorf("create tables: %w", err)
	}
	return nil
}

// createMissing is the body of createTables' transaction: it checks each
// table, creates it if it is missing, creates its expiry index if that is,
// and probes the claims table with a write it undoes.
func (s *SQLiteStore) createMissing(ctx context.Context, exec func(q string) error) error {
	var stmts []string
	for _, t := range s.tables() {
		exists, err := s.checkTable(ctx, t)
		if err != nil {
			return err
		}
		if !exists {
			stmts = append(stmts, `CREATE TABLE "`+t.name+`"`+t.create)
		}
		stmts = append(stmts, `CREATE INDEX IF NOT EXISTS "idx_`+t.name+`_expires" ON "`+t.name+`"(expires_at)`)
	}
	stmts = append(stmts,
		"SAVEPOINT dedupe_probe",
		"INSERT INTO "+s.claims+" (dedupe_key, token, expires_at) VALUES ('', '', 0) ON CONFLICT(dedupe_key) DO NOTHING",
		"ROLLBACK TO dedupe_probe",
		"RELEASE dedupe_probe")
	for _, q := range stmts {
		if err := exec(q); err != nil {
			return err
		}
	}
	return nil
}

// sqliteColumnInfo is what the schema says of a column.
type sqliteColumnInfo struct {
	typ             string
	notNull, hasDef bool
	pk              int
}

// checkTable reports whether t exists, and an error if it exists with a shape
// the store cannot use: t.shape's columns (the first the sole primary key), no
// other column that an insert must fill, and a rowid if t.rowid.
func (s *SQLiteStore) checkTable(ctx context.Context, t sqliteTable) (bool, error) {
	var typ string
	err := s.conn.QueryRowContext(ctx, "SELECT type FROM sqlite_schema WHERE name = ? COLLATE NOCASE AND type IN ('table', 'view')", t.name).Scan(&typ)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read schema: %w", err)
	}
	if typ != "table" {
		return true, incompatibleTable(t, "it is a %s", typ)
	}
	cols, err := s.columns(ctx, t.name)
	if err != nil {
		return true, err
	}
	for i, w := range t.shape {
		col, ok := cols[w.name]
		switch {
		case !ok:
			return true, incompatibleTable(t, "no column %s", w.name)
		case sqliteAffinity(col.typ) != w.affinity:
			return true, incompatibleTable(t, "column %s is %q (%s affinity), want %s", w.name, col.typ, sqliteAffinity(col.typ), w.affinity)
		case i == 0 && col.pk != 1:
			return true, incompatibleTable(t, "column %s is not the primary key", w.name)
		case i > 0 && col.pk != 0:
			return true, incompatibleTable(t, "column %s is part of the primary key", w.name)
		}
		delete(cols, w.name)
	}
	for name, col := range cols {
		if col.pk > 0 {
			return true, incompatibleTable(t, "column %s is part of the primary key", name)
		}
		if col.notNull && !col.hasDef {
			return true, incompatibleTable(t, "column %s is NOT NULL without a default", name)
		}
	}
	if t.rowid {
		if _, err := s.conn.ExecContext(ctx, `SELECT rowid FROM "`+t.name+`" LIMIT 0`); err != nil {
			return true, incompatibleTable(t, "it has no rowid")
		}
	}
	return true, nil
}

func incompatibleTable(t sqliteTable, format string, args ...any) error {
	return fmt.Errorf("table %s has an incompatible shape: %s", t.name, fmt.Sprintf(format, args...))
}

// columns returns the columns of table by their names in lower case.
func (s *SQLiteStore) columns(ctx context.Context, table string) (map[string]sqliteColumnInfo, error) {
	rows, err := s.conn.QueryContext(ctx, `SELECT name, type, "notnull", dflt_value IS NOT NULL, pk FROM pragma_table_info(?)`, table)
	if err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	defer rows.Close()
	cols := map[string]sqliteColumnInfo{}
	for rows.Next() {
		var name string
		var col sqliteColumnInfo
		if err := rows.Scan(&name, &col.typ, &col.notNull, &col.hasDef, &col.pk); err != nil {
			return nil, fmt.Errorf("read schema: %w", err)
		}
		cols[strings.ToLower(name)] = col
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema: %w", err)
	}
	return cols, nil
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
