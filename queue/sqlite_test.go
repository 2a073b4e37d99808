package queue_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/queue"
)

// TestSQLiteUpgrade: a table written by an earlier version, without the
// reason column, is upgraded in place; its messages are kept.
func TestSQLiteUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	now := time.Now().UnixNano()
	m := queue.Message{ID: "old", Key: dedupe.Key{Channel: "c", MessageID: "1"}, Method: "POST", Target: "/", Body: []byte("{}")}
	data, err := m.MarshalBinary()
	require.NoError(t, err)
	for _, stmt := range []string{
		`CREATE TABLE dedupe_queue (
	id TEXT PRIMARY KEY, key TEXT NOT NULL, state INTEGER NOT NULL,
	attempts INTEGER NOT NULL DEFAULT 0, receipt TEXT, visible_at INTEGER NOT NULL,
	accepted_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, data BLOB)`,
		`CREATE UNIQUE INDEX dedupe_queue_live ON dedupe_queue (key) WHERE state < 3`,
	} {
		_, err := db.Exec(stmt)
		require.NoError(t, err)
	}
	_, err = db.Exec(`INSERT INTO dedupe_queue (id, key, state, visible_at, accepted_at, updated_at, data)
VALUES (?1, ?2, 1, ?3, ?3, ?3, ?4)`, m.ID, m.Key.String(), now, data)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	for range 2 { // the second open finds the column
		q, err := queue.OpenSQLite(path, queue.SQLiteConfig{})
		require.NoError(t, err)
		e, ok, err := q.Status(t.Context(), "old")
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, queue.StateQueued, e.State)
		require.NoError(t, q.Close())
	}
	q, err := queue.OpenSQLite(path, queue.SQLiteConfig{})
	require.NoError(t, err)
	defer q.Close()
	d, err := q.Take(t.Context())
	require.NoError(t, err)
	require.NoError(t, q.Update(t.Context(), d, queue.Change{State: queue.StateFailed, Reason: "why"}))
	e, _, err := q.Status(t.Context(), "old")
	require.NoError(t, err)
	require.Equal(t, "why", e.Reason)
}
