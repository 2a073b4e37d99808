package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

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
