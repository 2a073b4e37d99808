package dedupe_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
			var forever sqliteForever
			dedupetest.Run(t, dedupetest.Config{
				New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
					path := filepath.Join(t.TempDir(), "dedupe.db")
					s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{
						TTL: o.TTL, Lease: o.Lease, Now: o.Now, Synchronous: sync,
					})
					require.NoError(t, err)
					forever.add(s, path, "gateway_dedupe")
					return s
				},
				MarkForever: forever.mark,
			})
		})
	}
	// A caller-owned database left in the default rollback-journal mode, with
	// another table name.
	t.Run("caller-owned", func(t *testing.T) {
		var forever sqliteForever
		dedupetest.Run(t, dedupetest.Config{
			New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
				path := filepath.Join(t.TempDir(), "dedupe.db")
				s, err := dedupe.NewSQLiteStore(rawDB(t, path), dedupe.SQLiteConfig{TTL: o.TTL, Lease: o.Lease, Now: o.Now, Table: "Dedupe_2"})
				require.NoError(t, err)
				forever.add(s, path, "Dedupe_2")
				return s
			},
			MarkForever: forever.mark,
		})
	})
}

// sqliteForever writes marks that never expire to the stores it was told of,
// as NekoBot's own code may: a row whose expires_at is NULL.
type sqliteForever struct {
	mu    sync.Mutex
	files map[dedupe.Store][2]string // path and table
}

func (f *sqliteForever) add(st dedupe.Store, path, table string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.files == nil {
		f.files = map[dedupe.Store][2]string{}
	}
	f.files[st] = [2]string{path, table}
}

func (f *sqliteForever) mark(t *testing.T, st dedupe.Store, k dedupe.Key) {
	f.mu.Lock()
	file, ok := f.files[st]
	f.mu.Unlock()
	require.True(t, ok, "a store New did not return")
	_, err := rawDB(t, file[0]).Exec(`INSERT INTO "`+file[1]+`" (dedupe_key, channel_id, message_id, created_at, expires_at)
VALUES (?, ?, ?, '2026-11-29 20:30:00', NULL)`, k.String(), k.Channel, k.MessageID)
	require.NoError(t, err)
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

func TestSQLiteMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "d.db")
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.Error(t, err)
	assert.Nil(t, s)
	assert.Contains(t, err.Error(), "does not exist")
	assert.NoDirExists(t, filepath.Dir(path))
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
