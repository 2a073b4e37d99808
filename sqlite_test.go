package dedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// sqliteT0 is the tests' clock: the time NekoBot's fixture is read at.
var sqliteT0 = time.Date(2026, 11, 29, 20, 30, 0, 0, time.UTC)

// openSQLite opens a store on path, closed at the end of the test.
func openSQLite(t testing.TB, path string, cfg dedupe.SQLiteConfig) *dedupe.SQLiteStore {
	t.Helper()
	s, err := dedupe.OpenSQLite(path, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawDB opens path with plain database/sql, as another program would.
func rawDB(t testing.TB, path string) *sql.DB {
	t.Helper()
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	db, err := sql.Open("sqlite", "file:"+esc+"?_pragma=busy_timeout(5000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func TestSQLiteConformance(t *testing.T) {
	for _, sync := range []string{"FULL", "normal"} {
		t.Run(sync, func(t *testing.T) {
			dedupetest.Run(t, dedupetest.Config{
				New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
					s, err := dedupe.OpenSQLite(filepath.Join(t.TempDir(), "dedupe.db"), dedupe.SQLiteConfig{
						TTL: o.TTL, Lease: o.Lease, Now: o.Now, Synchronous: sync,
					})
					require.NoError(t, err)
					return s
				},
			})
		})
	}
	// A caller-owned database left in the default rollback-journal mode, with
	// another table name.
	t.Run("caller-owned", func(t *testing.T) {
		dedupetest.Run(t, dedupetest.Config{
			New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
				db := rawDB(t, filepath.Join(t.TempDir(), "dedupe.db"))
				s, err := dedupe.NewSQLiteStore(db, dedupe.SQLiteConfig{TTL: o.TTL, Lease: o.Lease, Now: o.Now, Table: "Dedupe_2"})
				require.NoError(t, err)
				return s
			},
		})
	})
}

// nekobotFixture copies NekoBot's database into a temporary directory, or skips
// the test when the shared test data is absent.
func nekobotFixture(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "shared", "testdata", "nekobot", "gateway.db")
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("NekoBot fixture %s is absent (the shared test data sits beside the repository); skipping", src)
	}
	require.NoError(t, err)
	defer in.Close()
	dst := filepath.Join(t.TempDir(), "gateway.db")
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return dst
}

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

// nekobotExists reads key as NekoBot's SQLiteDedupeStore does: the row's
// expires_at parsed as a naive datetime (datetime.fromisoformat), present while
// now <= expires_at, and present forever when NULL or unparsable. now is
// NekoBot's naive local time (datetime.now()).
func nekobotExists(t *testing.T, db *sql.DB, key string, now time.Time) bool {
	t.Helper()
	var exp sql.NullString
	err := db.QueryRow("SELECT expires_at FROM gateway_dedupe WHERE dedupe_key = ?", key).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return false
	}
	require.NoError(t, err)
	if !exp.Valid {
		return true
	}
	naive := now.Format("2006-01-02T15:04:05.999999")
	nowNaive, err := time.Parse("2006-01-02T15:04:05.999999", naive)
	require.NoError(t, err)
	for _, layout := range []string{"2006-01-02T15:04:05.000000", "2006-01-02T15:04:05"} {
		if e, err := time.Parse(layout, exp.String); err == nil {
			return !nowNaive.After(e)
		}
	}
	return true
}

func TestSQLiteNekoBotFixture(t *testing.T) {
	path := nekobotFixture(t)
	others := dumpTables(t, path, "gateway_dedupe", "gateway_dedupe_claims")
	dedupeSchema := schemaOf(t, path, "gateway_dedupe")

	clock := dedupetest.NewClock(sqliteT0)
	s := openSQLite(t, path, dedupe.SQLiteConfig{Location: time.UTC, Now: clock.Now})
	ctx := context.Background()

	live := map[string]bool{"qq:1001": true, "telegram:5": true, "web:a:b:c": true, "discord:123456789012345678": true}
	db := rawDB(t, path)
	rows, err := db.Query("SELECT dedupe_key FROM gateway_dedupe ORDER BY dedupe_key")
	require.NoError(t, err)
	var all []string
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		all = append(all, k)
	}
	require.NoError(t, rows.Err())
	require.Len(t, all, 6, "fixture rows")
	got := map[string]bool{}
	for _, text := range all {
		k, err := dedupe.ParseKey(text)
		require.NoError(t, err, text)
		ok, err := s.Exists(ctx, k)
		require.NoError(t, err)
		if ok {
			got[text] = true
		}
		assert.Equal(t, ok, nekobotExists(t, db, text, clock.Now()), "store and NekoBot agree on %s", text)
	}
	assert.Equal(t, live, got, "live keys at %v", sqliteT0)

	// Claim sees NekoBot's marks; an expired one can be claimed.
	c, cSt, err := claimNew(ctx, s, dedupe.Key{Channel: "telegram", MessageID: "5"}, 0)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Duplicate, cSt)
	c, cSt, err = claimNew(ctx, s, dedupe.Key{Channel: "qq", MessageID: "1002"}, 0)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, cSt)
	assert.False(t, nekobotExists(t, db, "qq:1002", clock.Now()), "a claim is no mark to NekoBot")

	// Marks written by the store read correctly by NekoBot's rules, with and
	// without microseconds.
	k1 := dedupe.Key{Channel: "telegram", MessageID: "6"}
	require.NoError(t, s.Mark(ctx, k1, time.Hour))
	clock.Advance(250001 * time.Microsecond)
	require.NoError(t, s.Mark(ctx, c.Key, 2*time.Hour)) // qq:1002 again, and drops the claim
	k3 := dedupe.Key{Channel: "web", MessageID: "x:y"}
	require.NoError(t, s.Mark(ctx, k3, time.Minute))
	type row struct{ channel, id, created, expires string }
	read := func(key string) row {
		var r row
		require.NoError(t, db.QueryRow("SELECT channel_id, message_id, created_at, expires_at FROM gateway_dedupe WHERE dedupe_key = ?", key).
			Scan(&r.channel, &r.id, &r.created, &r.expires))
		return r
	}
	assert.Equal(t, row{"telegram", "6", "2026-11-29T20:30:00", "2026-11-29T21:30:00"}, read("telegram:6"))
	// NekoBot's upsert keeps created_at and updates expires_at.
	assert.Equal(t, row{"qq", "1002", "2026-11-29T20:28:32.893487", "2026-11-29T22:30:00.250001"}, read("qq:1002"))
	assert.Equal(t, row{"web", "x:y", "2026-11-29T20:30:00.250001", "2026-11-29T20:31:00.250001"}, read("web:x:y"))
	for _, at := range []time.Time{clock.Now(), sqliteT0.Add(time.Minute), sqliteT0.Add(59 * time.Minute), sqliteT0.Add(61 * time.Minute)} {
		for _, k := range []dedupe.Key{k1, c.Key, k3} {
			clock.Set(at)
			ok, err := s.Exists(ctx, k)
			require.NoError(t, err)
			assert.Equal(t, nekobotExists(t, db, k.String(), at), ok, "%s at %v", k, at)
		}
	}
	clock.Set(sqliteT0)
	var claims int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM gateway_dedupe_claims").Scan(&claims))
	assert.Zero(t, claims, "Mark dropped the claim")

	// Only x:1 has expired now; qq:1002 was marked again.
	n, err := s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	var left []string
	rows, err = db.Query("SELECT dedupe_key FROM gateway_dedupe ORDER BY dedupe_key")
	require.NoError(t, err)
	for rows.Next() {
		var k string
		require.NoError(t, rows.Scan(&k))
		left = append(left, k)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, []string{"discord:123456789012345678", "qq:1001", "qq:1002", "telegram:5", "telegram:6", "web:a:b:c", "web:x:y"}, left)

	pythonReadsMarks(t, path, map[string]bool{"qq:1001": true, "qq:1002": true, "telegram:5": true, "telegram:6": true, "web:x:y": true, "web:a:b:c": true})

	// NekoBot's own cleanup, a text comparison, agrees with the store's marks.
	nekobotCleanup := func(now string) int64 {
		res, err := db.Exec("DELETE FROM gateway_dedupe WHERE expires_at < ?", now)
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		return n
	}
	assert.Zero(t, nekobotCleanup("2026-11-29T20:31:00.250001"), "every mark left is live to NekoBot")
	assert.EqualValues(t, 1, nekobotCleanup("2026-11-29T20:31:00.250002"), "web:x:y expires when the store says")

	require.NoError(t, s.Close())
	require.NoError(t, db.Close())
	assert.Equal(t, others, dumpTables(t, path, "gateway_dedupe", "gateway_dedupe_claims"), "NekoBot's other tables")
	assert.Equal(t, dedupeSchema, schemaOf(t, path, "gateway_dedupe"), "NekoBot's table and index")
}

// pythonReadsMarks runs NekoBot's read rule in Python's own sqlite3 and
// datetime, when python3 is installed, on the file the store has open, at
// 2026-11-29T20:30:00 naive.
func pythonReadsMarks(t *testing.T, path string, want map[string]bool) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Log("python3 not found: skipping the check with Python's datetime")
		return
	}
	const script = `
import sqlite3, sys
from datetime import datetime
now = datetime.fromisoformat("2026-11-29T20:30:00")
db = sqlite3.connect(sys.argv[1], timeout=5)
for key in sys.argv[2:]:
    row = db.execute("SELECT expires_at FROM gateway_dedupe WHERE dedupe_key = ?", (key,)).fetchone()
    if row is None:
        print(key, False); continue
    try:
        print(key, row[0] is None or now <= datetime.fromisoformat(row[0]))
    except ValueError:
        print(key, True)
`
	keys := []string{"qq:1001", "qq:1002", "telegram:5", "telegram:6", "web:x:y", "web:a:b:c", "x:1", "nope:1"}
	out, err := exec.Command(py, append([]string{"-c", script, path}, keys...)...).CombinedOutput()
	if err != nil {
		t.Logf("python3 could not run the check (%v): %s", err, out)
		return
	}
	t.Logf("python3 read %d keys", len(keys))
	got := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, " ")
		if v == "True" {
			got[k] = true
		}
	}
	assert.Equal(t, want, got, "Python NekoBot's view of the marks")
}

func TestSQLiteTimestampFormats(t *testing.T) {
	// The store's zone is UTC+2, so a naive "22:30" is the test clock's 20:30Z.
	loc := time.FixedZone("UTC+2", 2*60*60)
	path := filepath.Join(t.TempDir(), "d.db")
	s := openSQLite(t, path, dedupe.SQLiteConfig{Location: loc, Now: func() time.Time { return sqliteT0 }})
	db := rawDB(t, path)
	for i, tc := range []struct {
		expires any
		want    bool
	}{
		{"2026-11-29T22:30:00.000001", true},
		{"2026-11-29T22:30:00.000000", false}, // expires at the clock: gone
		{"2026-11-29T22:29:59.999999", false},
		{"2026-11-29T22:30:01", true},
		{"2026-11-29T22:29:59", false},
		{"2026-11-29 22:30:01", true},
		{"2026-11-29T22:30:00.5", true},
		{"2026-11-29T22:30:00.123456789", true},
		{"2026-11-29T20:30:01Z", true},
		{"2026-11-29T20:29:59.9Z", false},
		{"2026-11-29T21:30:01+01:00", true},
		{"2026-11-29T21:29:59+01:00", false},
		{"2026-11-29T15:30:01-05:00", true},
		{"2026-11-29T15:29:59-05:00", false},
		{nil, true},                    // NULL: present forever
		{"", true},                     // unparsable: present forever
		{"never", true},                // unparsable
		{"2026-02-30T00:00:00", true},  // no such day: unparsable
		{"2026-11-29T24:00:00", true},  // no such hour
		{"2026-11-29T22:30:00.", true}, // empty fraction
		{"2026-11-29T22:30:00+2", true},
		{"1999-01-01T00:00:00", false},
	} {
		k := dedupe.Key{Channel: "fmt", MessageID: fmt.Sprint(i)}
		_, err := db.Exec("INSERT INTO gateway_dedupe VALUES (?, 'fmt', 'x', '2026-11-29T20:00:00', ?)", k.String(), tc.expires)
		require.NoError(t, err)
		ok, err := s.Exists(context.Background(), k)
		require.NoError(t, err)
		assert.Equal(t, tc.want, ok, "expires_at %v", tc.expires)
		_, cSt, err := claimNew(context.Background(), s, k, time.Minute)
		require.NoError(t, err)
		assert.Equal(t, tc.want, cSt == dedupe.Duplicate, "Claim with expires_at %v: %v", tc.expires, cSt)
	}
}

func TestSQLiteWritesLocalTime(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	loc := time.FixedZone("UTC-3:30", -(3*60+30)*60)
	now := time.Date(2026, 12, 31, 23, 0, 0, 999, time.UTC) // sub-microsecond part is dropped
	s := openSQLite(t, path, dedupe.SQLiteConfig{Location: loc, Now: func() time.Time { return now }})
	k := dedupe.Key{Channel: "qq", MessageID: "a:b"}
	require.NoError(t, s.Mark(context.Background(), k, 90*time.Minute+time.Microsecond))
	var channel, id, created, expires string
	require.NoError(t, rawDB(t, path).QueryRow("SELECT channel_id, message_id, created_at, expires_at FROM gateway_dedupe WHERE dedupe_key = 'qq:a:b'").
		Scan(&channel, &id, &created, &expires))
	assert.Equal(t, []string{"qq", "a:b", "2026-12-31T19:30:00", "2026-12-31T21:00:00.000001"}, []string{channel, id, created, expires})
}

func TestSQLiteConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  dedupe.SQLiteConfig
		want string
	}{
		{"synchronous", dedupe.SQLiteConfig{Synchronous: "OFF"}, "Synchronous"},
		{"synchronous-extra", dedupe.SQLiteConfig{Synchronous: "EXTRA"}, "Synchronous"},
		{"table-dash", dedupe.SQLiteConfig{Table: "a-b"}, "table name"},
		{"table-digit", dedupe.SQLiteConfig{Table: "1abc"}, "table name"},
		{"table-quote", dedupe.SQLiteConfig{Table: `x"; DROP TABLE gateway_dedupe; --`}, "table name"},
		{"table-space", dedupe.SQLiteConfig{Table: "a b"}, "table name"},
		{"table-unicode", dedupe.SQLiteConfig{Table: "täble"}, "table name"},
		{"table-reserved", dedupe.SQLiteConfig{Table: "sqlite_master"}, "table name"},
		{"table-long", dedupe.SQLiteConfig{Table: strings.Repeat("t", 65)}, "table name"},
		{"cleanup-interval", dedupe.SQLiteConfig{CleanupInterval: -time.Second}, "CleanupInterval"},
		{"busy-timeout", dedupe.SQLiteConfig{BusyTimeout: -time.Second}, "BusyTimeout"},
		{"cleanup-batch", dedupe.SQLiteConfig{CleanupBatch: -1}, "CleanupBatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".db")
			s, err := dedupe.OpenSQLite(path, tc.cfg)
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "dedupe: "), err.Error())
			assert.NoFileExists(t, path, "a refused config creates no file")
			s, err = dedupe.NewSQLiteStore(rawDB(t, filepath.Join(dir, "owned.db")), tc.cfg)
			require.Error(t, err)
			assert.Nil(t, s)
		})
	}
	for _, path := range []string{"", ":memory:", "file:x.db?mode=memory"} {
		_, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
		assert.ErrorContains(t, err, "want the path of a database file", "path %q", path)
	}
	_, err := dedupe.OpenSQLite(dir, dedupe.SQLiteConfig{})
	assert.ErrorContains(t, err, "is a directory")
	_, err = dedupe.NewSQLiteStore(nil, dedupe.SQLiteConfig{})
	assert.Error(t, err)
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
	assert.Equal(t, []string{"_My_Dedupe9", "_My_Dedupe9_claims", "idx__My_Dedupe9_claims_expires", "idx__My_Dedupe9_expires"}, names)
	// Reopening finds the tables again, whatever the case of the name.
	require.NoError(t, s.Close())
	s = openSQLite(t, path, dedupe.SQLiteConfig{Table: "_my_dedupe9"})
	ok, err := s.Exists(context.Background(), k)
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestSQLiteCallerOwnedDB(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	db := rawDB(t, path)
	db.SetMaxOpenConns(2)
	var busyBefore int
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	require.NoError(t, conn.QueryRowContext(context.Background(), "PRAGMA busy_timeout").Scan(&busyBefore))
	require.NoError(t, conn.Close())

	s, err := dedupe.NewSQLiteStore(db, dedupe.SQLiteConfig{BusyTimeout: time.Second})
	require.NoError(t, err)
	k := dedupe.Key{Channel: "own", MessageID: "1"}
	require.NoError(t, s.Mark(context.Background(), k, 0))
	ok, err := s.Exists(context.Background(), k)
	require.NoError(t, err)
	assert.True(t, ok)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	_, err = s.Exists(context.Background(), k)
	assert.ErrorIs(t, err, dedupe.ErrClosed)

	// The database is still open, and both its connections are as they were.
	require.NoError(t, db.Ping())
	var n int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM gateway_dedupe").Scan(&n))
	assert.Equal(t, 1, n)
	for range 2 {
		c1, err := db.Conn(context.Background())
		require.NoError(t, err)
		c2, err := db.Conn(context.Background())
		require.NoError(t, err)
		for _, c := range []*sql.Conn{c1, c2} {
			var busy int
			require.NoError(t, c.QueryRowContext(context.Background(), "PRAGMA busy_timeout").Scan(&busy))
			assert.Equal(t, busyBefore, busy, "busy_timeout of the pool's connections")
		}
		require.NoError(t, c1.Close())
		require.NoError(t, c2.Close())
	}

	one := rawDB(t, filepath.Join(t.TempDir(), "one.db"))
	one.SetMaxOpenConns(1)
	_, err = dedupe.NewSQLiteStore(one, dedupe.SQLiteConfig{})
	assert.ErrorContains(t, err, "one open connection")
}

// sqliteCode returns the SQLite result code of err, or 0.
func sqliteCode(err error) int {
	var e *sqlite.Error
	if errors.As(err, &e) {
		return e.Code() & 0xff
	}
	return 0
}

func TestSQLiteNotADatabase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	content := []byte(strings.Repeat("these are not the pages you are looking for\n", 200))
	require.NoError(t, os.WriteFile(path, content, 0o644))
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.Error(t, err)
	assert.Nil(t, s)
	assert.Contains(t, err.Error(), "not a SQLite database")
	assert.Contains(t, err.Error(), path)
	assert.Equal(t, 26, sqliteCode(err), "SQLITE_NOTADB, wrapped")
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, content, got, "the file is untouched")
	assert.NoFileExists(t, path+"-wal")
}

func TestSQLiteMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "d.db")
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.Error(t, err)
	assert.Nil(t, s)
	assert.Contains(t, err.Error(), "does not exist")
	assert.NoDirExists(t, filepath.Dir(path))
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

// lockDB takes the write lock of path from another connection, as another
// process would, until the returned function is called.
func lockDB(t *testing.T, path, how string) (unlock func()) {
	t.Helper()
	db := rawDB(t, path)
	conn, err := db.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), "BEGIN "+how)
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), "CREATE TABLE IF NOT EXISTS lock_probe (x); INSERT INTO lock_probe VALUES (1)")
	require.NoError(t, err)
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			_, err := conn.ExecContext(context.Background(), "COMMIT")
			require.NoError(t, err)
			require.NoError(t, conn.Close())
		})
	}
	t.Cleanup(unlock)
	return unlock
}

func TestSQLiteLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	clock := dedupetest.NewClock(sqliteT0)
	const timeout = 300 * time.Millisecond
	s := openSQLite(t, path, dedupe.SQLiteConfig{BusyTimeout: timeout, Now: clock.Now})
	ctx := context.Background()
	old := dedupe.Key{Channel: "lock", MessageID: "old"}
	require.NoError(t, s.Mark(ctx, old, 0))
	held, _, err := claimNew(ctx, s, dedupe.Key{Channel: "lock", MessageID: "held"}, 0)
	require.NoError(t, err)

	unlock := lockDB(t, path, "EXCLUSIVE")
	k := dedupe.Key{Channel: "lock", MessageID: "new"}
	start := time.Now()
	err = s.Mark(ctx, k, 0)
	elapsed := time.Since(start)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "database is locked by another connection for longer than the busy timeout (300ms)")
	assert.Equal(t, 5, sqliteCode(err), "SQLITE_BUSY, wrapped")
	assert.GreaterOrEqual(t, elapsed, timeout)
	assert.Less(t, elapsed, 5*time.Second)
	_, _, err = claimNew(ctx, s, k, 0)
	assert.ErrorContains(t, err, "locked")
	assert.ErrorContains(t, s.Release(ctx, held), "locked")

	// Readers do not wait for the lock in WAL mode.
	ok, err := s.Exists(ctx, old)
	require.NoError(t, err)
	assert.True(t, ok)

	unlock()
	ok, err = s.Exists(ctx, k)
	require.NoError(t, err)
	assert.False(t, ok, "the failed Mark wrote nothing")
	_, cSt, err := claimNew(ctx, s, held.Key, 0)
	require.NoError(t, err)
	assert.Equal(t, dedupe.InFlight, cSt, "the failed Release dropped nothing")
	require.NoError(t, s.Mark(ctx, k, 0))
	require.NoError(t, s.Release(ctx, held))
	ok, err = s.Exists(ctx, old)
	require.NoError(t, err)
	assert.True(t, ok)
}

func TestSQLiteCancelWhileLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	s := openSQLite(t, path, dedupe.SQLiteConfig{BusyTimeout: time.Minute})
	unlock := lockDB(t, path, "IMMEDIATE")
	k := dedupe.Key{Channel: "cancel", MessageID: "1"}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Mark(ctx, k, 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, _, err = claimNew(ctx, s, k, 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 10*time.Second, "cancelled calls return without waiting out the busy timeout")
	unlock()
	ok, err := s.Exists(context.Background(), k)
	require.NoError(t, err)
	assert.False(t, ok, "a cancelled Mark wrote nothing")
	_, cSt, err := claimNew(context.Background(), s, k, 0)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Claimed, cSt, "a cancelled Claim took nothing")
}

func TestSQLiteOpenWhileLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	// A rollback-journal database (NekoBot's kind) with a mark, exclusively
	// locked by another connection: even reading waits.
	db := rawDB(t, path)
	_, err := db.Exec(`CREATE TABLE gateway_dedupe (dedupe_key TEXT PRIMARY KEY, channel_id TEXT NOT NULL, message_id TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT);
INSERT INTO gateway_dedupe VALUES ('a:1', 'a', '1', '2026-11-29T20:00:00', NULL)`)
	require.NoError(t, err)
	unlock := lockDB(t, path, "EXCLUSIVE")
	start := time.Now()
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{BusyTimeout: 300 * time.Millisecond})
	require.Error(t, err)
	assert.Nil(t, s)
	assert.Contains(t, err.Error(), "locked")
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, err.Error())
	unlock()
	s = openSQLite(t, path, dedupe.SQLiteConfig{})
	ok, err := s.Exists(context.Background(), dedupe.Key{Channel: "a", MessageID: "1"})
	require.NoError(t, err)
	assert.True(t, ok)
}

// TestSQLiteBatchIsolation makes one Mark among many concurrent ones fail in
// SQL (a trigger refuses its key) and checks that only it fails, and that its
// partial work (dropping the key's claim) is undone.
func TestSQLiteBatchIsolation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	s := openSQLite(t, path, dedupe.SQLiteConfig{})
	ctx := context.Background()
	bad := dedupe.Key{Channel: "iso", MessageID: "bad"}
	c, cSt, err := claimNew(ctx, s, bad, 0)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, cSt)
	_, err = rawDB(t, path).Exec(`CREATE TRIGGER refuse_bad BEFORE INSERT ON gateway_dedupe WHEN NEW.dedupe_key = 'iso:bad'
BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END`)
	require.NoError(t, err)

	for round := range 5 {
		unlock := lockDB(t, path, "IMMEDIATE") // let the calls queue up into one batch
		var wg, started sync.WaitGroup
		errs := make([]error, 64)
		keys := make([]dedupe.Key, 64)
		for i := range keys {
			keys[i] = dedupe.Key{Channel: "iso", MessageID: fmt.Sprintf("%d-%d", round, i)}
			if i == 31 {
				keys[i] = bad
			}
			wg.Add(1)
			started.Add(1)
			go func() {
				defer wg.Done()
				started.Done()
				errs[i] = s.Mark(ctx, keys[i], 0)
			}()
		}
		// The calls queue up behind the lock, most of them for one
		// transaction; the outcome must not depend on how they are batched.
		started.Wait()
		unlock()
		wg.Wait()
		for i, err := range errs {
			if keys[i] == bad {
				assert.ErrorContains(t, err, "refused by trigger")
				assert.True(t, strings.HasPrefix(err.Error(), "dedupe: "), err.Error())
				continue
			}
			require.NoError(t, err, keys[i].String())
			ok, err := s.Exists(ctx, keys[i])
			require.NoError(t, err)
			assert.True(t, ok, keys[i].String())
		}
	}
	ok, err := s.Exists(ctx, bad)
	require.NoError(t, err)
	assert.False(t, ok)
	_, gotSt, err := claimNew(ctx, s, bad, 0)
	require.NoError(t, err)
	assert.Equal(t, dedupe.InFlight, gotSt, "the failed Mark left the claim in place")
	require.NoError(t, s.Extend(ctx, c, 0), "and its owner still holds it")
}

func TestSQLiteCleanupExpired(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	clock := dedupetest.NewClock(sqliteT0)
	s := openSQLite(t, path, dedupe.SQLiteConfig{Now: clock.Now, Location: time.UTC, CleanupBatch: 100})
	ctx := context.Background()
	db := rawDB(t, path)

	n, err := s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.Zero(t, n, "empty store")

	const short, long = 350, 40
	var claims []dedupe.Claim
	for i := range short {
		require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "m", MessageID: fmt.Sprint(i)}, time.Minute))
		c, _, err := claimNew(ctx, s, dedupe.Key{Channel: "c", MessageID: fmt.Sprint(i)}, time.Minute)
		require.NoError(t, err)
		claims = append(claims, c)
	}
	for i := range long {
		require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "M", MessageID: fmt.Sprint(i)}, time.Hour))
		_, _, err := claimNew(ctx, s, dedupe.Key{Channel: "C", MessageID: fmt.Sprint(i)}, time.Hour)
		require.NoError(t, err)
	}
	// Rows in other formats: kept forever, or expired in an offset NekoBot's
	// text comparison and ours would read late, or live though their text
	// sorts early (250 of them, more than a batch).
	insert := func(key string, expires any) {
		_, err := db.Exec("INSERT INTO gateway_dedupe VALUES (?, 'x', 'x', '2026-11-29T20:00:00', ?)", key, expires)
		require.NoError(t, err)
	}
	insert("x:null", nil)
	insert("x:garbage", "garbage")
	insert("x:0000", "0000-00-00")
	insert("x:z-expired", "2026-11-29T20:05:00Z")
	insert("x:space-expired", "2026-11-29 20:05:00")
	insert("x:milli-expired", "2026-11-29T20:05:00.123")
	for i := range 250 {
		insert(fmt.Sprintf("x:west-%d", i), fmt.Sprintf("2026-11-29T20:%02d:00-05:00", i%60)) // 01:xx next day UTC
	}
	insert("x:east-expired", "2026-11-29T22:00:00+05:00") // 17:00Z, but its text sorts after 20:40

	clock.Advance(10 * time.Minute) // 20:40: the short ones have expired
	n, err = s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2*short+3, n, "expired marks and claims in the store's format, and the three other expired rows")

	count := func(q string) int {
		var n int
		require.NoError(t, db.QueryRow(q).Scan(&n))
		return n
	}
	assert.Equal(t, long+3+250+1, count("SELECT count(*) FROM gateway_dedupe"))
	assert.Equal(t, long, count("SELECT count(*) FROM gateway_dedupe_claims"))
	for _, k := range []string{"x:null", "x:garbage", "x:0000", "x:west-7", "x:east-expired", "M:1"} {
		assert.Equal(t, 1, count("SELECT count(*) FROM gateway_dedupe WHERE dedupe_key = '"+k+"'"), k)
	}
	for i := range long {
		ok, err := s.Exists(ctx, dedupe.Key{Channel: "M", MessageID: fmt.Sprint(i)})
		require.NoError(t, err)
		assert.True(t, ok)
		_, cSt, err := claimNew(ctx, s, dedupe.Key{Channel: "C", MessageID: fmt.Sprint(i)}, 0)
		require.NoError(t, err)
		assert.Equal(t, dedupe.InFlight, cSt)
	}
	assert.ErrorIs(t, s.Release(ctx, claims[0]), dedupe.ErrNotOwner)

	// Cleanup again: nothing new.
	n, err = s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)

	// Later the east row's text sorts before the clock too.
	clock.Set(time.Date(2026, 11, 29, 22, 0, 1, 0, time.UTC))
	n, err = s.CleanupExpired(ctx)
	require.NoError(t, err)
	assert.EqualValues(t, 2*long+1, n)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.CleanupExpired(cctx)
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Close())
	_, err = s.CleanupExpired(ctx)
	assert.ErrorIs(t, err, dedupe.ErrClosed)
}

func TestSQLiteSweeper(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	synctest.Test(t, func(t *testing.T) {
		clock := dedupetest.NewClock(sqliteT0)
		s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{Now: clock.Now, CleanupInterval: time.Minute})
		require.NoError(t, err)
		ctx := context.Background()
		require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "s", MessageID: "short"}, 30*time.Second))
		require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "s", MessageID: "long"}, time.Hour))
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		rows := func() int {
			var n int
			require.NoError(t, db.QueryRow("SELECT count(*) FROM gateway_dedupe").Scan(&n))
			return n
		}
		clock.Advance(40 * time.Second)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		assert.Equal(t, 2, rows(), "no sweep before the interval")
		time.Sleep(time.Second) // the sweeper's first tick
		synctest.Wait()         // and its cleanup, done
		assert.Equal(t, 1, rows(), "the sweep removed the expired mark")
		require.NoError(t, db.Close())
		require.NoError(t, s.Close()) // stops and waits for the sweeper: synctest fails on a leaked goroutine
		require.NoError(t, s.Close())
	})
}

func TestSQLiteReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	clock := dedupetest.NewClock(sqliteT0)
	cfg := dedupe.SQLiteConfig{Now: clock.Now}
	s := openSQLite(t, path, cfg)
	ctx := context.Background()
	marked := dedupe.Key{Channel: "r", MessageID: "marked"}
	require.NoError(t, s.Mark(ctx, marked, time.Hour))
	c, _, err := claimNew(ctx, s, dedupe.Key{Channel: "r", MessageID: "claimed"}, time.Hour)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openSQLite(t, path, cfg)
	ok, err := s.Exists(ctx, marked)
	require.NoError(t, err)
	assert.True(t, ok, "a mark survives a restart")
	_, gotSt, err := claimNew(ctx, s, c.Key, 0)
	require.NoError(t, err)
	assert.Equal(t, dedupe.InFlight, gotSt, "so does a claim")
	require.NoError(t, s.Release(ctx, c), "and the token of the previous process still holds it")
}

// TestSQLiteCloseRace closes the store under concurrent writes: each write
// either succeeds, and is there after a reopen, or fails with ErrClosed.
func TestSQLiteCloseRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.NoError(t, err)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var done []dedupe.Key
	enough := make(chan struct{})
	signal := sync.OnceFunc(func() { close(enough) })
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				k := dedupe.Key{Channel: "close", MessageID: fmt.Sprintf("%d-%d", g, i)}
				err := s.Mark(ctx, k, 0)
				if errors.Is(err, dedupe.ErrClosed) {
					return
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				done = append(done, k)
				if len(done) == 200 {
					signal()
				}
				mu.Unlock()
			}
		}()
	}
	<-enough
	require.NoError(t, s.Close())
	wg.Wait()
	s = openSQLite(t, path, dedupe.SQLiteConfig{})
	for _, k := range done {
		ok, err := s.Exists(ctx, k)
		require.NoError(t, err)
		require.True(t, ok, "%s was marked before Close", k)
	}
}

// FuzzSQLiteExpiresAt stores arbitrary text as a mark's expiry and checks that
// Exists agrees with a reference reading built on package time: NULL-like and
// unreadable text is present forever, readable text until its time.
func FuzzSQLiteExpiresAt(f *testing.F) {
	for _, s := range []string{
		"2026-11-29T20:30:00.000001", "2026-11-29T20:30:00", "2026-11-29 20:29:59", "2026-11-29T20:30:00Z",
		"2026-11-29T21:30:00+01:00", "2026-11-29T19:30:00-01:00", "2026-11-29T20:30:00.1234567891",
		"2026-02-29T00:00:00", "9999-12-31T23:59:59.999999", "0000-01-01T00:00:00", "", "x", "2026-11-29T20:30:00+01",
	} {
		f.Add(s)
	}
	path := filepath.Join(f.TempDir(), "d.db")
	s := openSQLite(f, path, dedupe.SQLiteConfig{Location: time.UTC, Now: func() time.Time { return sqliteT0 }})
	db := rawDB(f, path)
	f.Fuzz(func(t *testing.T, exp string) {
		k := dedupe.Key{Channel: "fuzz", MessageID: "k"}
		_, err := db.Exec("INSERT INTO gateway_dedupe VALUES ('fuzz:k', 'fuzz', 'k', '', ?) ON CONFLICT(dedupe_key) DO UPDATE SET expires_at = excluded.expires_at", exp)
		require.NoError(t, err)
		ok, err := s.Exists(context.Background(), k)
		require.NoError(t, err)
		want := true
		if e, good := referenceTime(exp); good {
			want = sqliteT0.Before(e)
		}
		assert.Equal(t, want, ok, "expires_at %q", exp)
	})
}

var referenceForm = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?$`)

// referenceTime reads the timestamp forms the store documents with package
// time: naive ISO-8601 in UTC (the test's Location) or RFC 3339, 'T' or ' '
// between date and time, up to nine digits of fraction, zone offsets within
// ±23:59.
func referenceTime(s string) (time.Time, bool) {
	m := referenceForm.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	s = s[:10] + "T" + s[11:]
	if zone := m[2]; zone == "" {
		t, err := time.ParseInLocation("2006-01-02T15:04:05.999999999", s, time.UTC)
		return t, err == nil
	} else if zone != "Z" && (zone[1:3] > "23" || zone[4:] > "59") {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}
