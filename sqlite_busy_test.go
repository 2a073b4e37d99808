package dedupe_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

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
