package dedupe_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// dumpTables returns the schema and every row of the tables of path except
// skip, in a comparable form.
func dumpTables(t *testing.T, path string, skip ...string) []string {
	t.Helper()
	db := rawDB(t, path)
	defer db.Close()
	var out []string
	rows, err := db.Query("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_schema ORDER BY type, name")
	require.NoError(t, err)
	var tables []string
	for rows.Next() {
		var typ, name, tbl, q string
		require.NoError(t, rows.Scan(&typ, &name, &tbl, &q))
		if slices.Contains(skip, tbl) {
			continue
		}
		out = append(out, typ+" "+name+": "+q)
		if typ == "table" {
			tables = append(tables, name)
		}
	}
	require.NoError(t, rows.Err())
	rows.Close()
	for _, tbl := range tables {
		rows, err := db.Query(`SELECT * FROM "` + tbl + `"`)
		require.NoError(t, err)
		cols, err := rows.Columns()
		require.NoError(t, err)
		n := 0
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			lines = append(lines, fmt.Sprintf("%s row: %v", tbl, vals))
			n++
		}
		require.NoError(t, rows.Err())
		rows.Close()
		slices.Sort(lines)
		out = append(out, lines...)
		out = append(out, fmt.Sprintf("%s: %d rows", tbl, n))
	}
	return out
}

// schemaOf returns the schema entries of table and its indexes.
func schemaOf(t *testing.T, path, table string) []string {
	t.Helper()
	var out []string
	for _, line := range dumpTables(t, path) {
		if strings.HasPrefix(line, "table "+table+":") || strings.HasPrefix(line, "index idx_"+table+"_expires:") {
			out = append(out, line)
		}
	}
	require.Len(t, out, 2)
	return out
}

func TestSQLiteTableNames(t *testing.T) {
	path := filepath.Join(t.TempDir(), "weird?#%name.db")
	s := openSQLite(t, path, dedupe.SQLiteConfig{Table: "_My_Dedupe9"})
	k := dedupe.Key{Channel: "t", MessageID: "1"}
	require.NoError(t, s.Mark(context.Background(), k, 0))
	require.FileExists(t, path, "the path is taken literally")
	var names []string
	rows, err := rawDB(t, path).Query("SELECT name FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%' ORDER BY name")
	require.NoError(t, err)
	for rows.Next() {
		var n string
		require.NoError(t, rows.Scan(&n))
		names = append(names, n)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"_My_Dedupe9", "_My_Dedupe9_claims", "_My_Dedupe9_results", "idx__My_Dedupe9_claims_expires", "idx__My_Dedupe9_expires", "idx__My_Dedupe9_results_expires"}, names)
	// Reopening finds the tables again, whatever the case of the name.
	require.NoError(t, s.Close())
	s = openSQLite(t, path, dedupe.SQLiteConfig{Table: "_my_dedupe9"})
	ok, err := s.Exists(context.Background(), k)
	require.NoError(t, err)
	assert.True(t, ok)
}

// incompatible tables, each with a row that must survive the refused open.
func TestSQLiteIncompatibleTable(t *testing.T) {
	for _, tc := range []struct {
		name, ddl, want string
	}{
		{"other-columns", "CREATE TABLE gateway_dedupe (id INTEGER PRIMARY KEY, payload TEXT)", "no column dedupe_key"},
		{"missing-expires", "CREATE TABLE gateway_dedupe (dedupe_key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL)", "no column expires_at"},
		{"integer-expires", "CREATE TABLE gateway_dedupe (dedupe_key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at INTEGER)", "column expires_at"},
		{"no-primary-key", "CREATE TABLE gateway_dedupe (dedupe_key TEXT, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT)", "not the primary key"},
		{"composite-key", "CREATE TABLE gateway_dedupe (dedupe_key TEXT, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT, PRIMARY KEY (dedupe_key, channel_id))", "primary key"},
		{"extra-required", "CREATE TABLE gateway_dedupe (dedupe_key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT, tenant TEXT NOT NULL)", "tenant is NOT NULL without a default"},
		{"without-rowid", "CREATE TABLE gateway_dedupe (dedupe_key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT) WITHOUT ROWID", "no rowid"},
		{"view", "CREATE TABLE t (dedupe_key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT); CREATE VIEW gateway_dedupe AS SELECT * FROM t", "it is a view"},
		{"claims", "CREATE TABLE gateway_dedupe_claims (dedupe_key TEXT PRIMARY KEY, owner TEXT)", "gateway_dedupe_claims has an incompatible shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "d.db")
			db := rawDB(t, path)
			_, err := db.Exec(tc.ddl)
			require.NoError(t, err)
			_, err = db.Exec("CREATE TABLE keep (v TEXT); INSERT INTO keep VALUES ('precious')")
			require.NoError(t, err)
			before := dumpTables(t, path)
			s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), "incompatible shape")
			assert.Contains(t, err.Error(), tc.want)
			s, err = dedupe.NewSQLiteStore(db, dedupe.SQLiteConfig{})
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Equal(t, before, dumpTables(t, path), "nothing changed")
		})
	}
	// NekoBot's shape with an extra optional column is fine.
	path := filepath.Join(t.TempDir(), "d.db")
	_, err := rawDB(t, path).Exec("CREATE TABLE gateway_dedupe (dedupe_key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT, note VARCHAR(20) NOT NULL DEFAULT '')")
	require.NoError(t, err)
	s := openSQLite(t, path, dedupe.SQLiteConfig{})
	require.NoError(t, s.Mark(context.Background(), dedupe.Key{Channel: "a", MessageID: "b"}, 0))
}
