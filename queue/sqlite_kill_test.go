package queue_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp/durabletest"
	"github.com/gatewaykit/dedupe/queue"
	"github.com/stretchr/testify/require"
)

// TestSQLiteQueueKill kills a gateway whose Async queues in SQLite while
// handlers run, restarts it on the same file, and finds every accepted
// message processed exactly once. The marks live in the same file.
func TestSQLiteQueueKill(t *testing.T) {
	durabletest.Kill(t, sqliteKillConfig())
}

// TestSQLiteQueueKillDefaults is TestSQLiteQueueKill with the defaults a
// user gets: the Deduper's lease and the queue's visibility timeout (10 s)
// as they come. The messages whose worker was killed mid-handler run again,
// and every message is done, within a minute of the kill; with the
// Deduper's former 5-minute lease they waited that long (the test gives up
// after 2 minutes).
func TestSQLiteQueueKillDefaults(t *testing.T) {
	cfg := sqliteKillConfig()
	cfg.Lease, cfg.Messages = -1, 20
	open := cfg.Open
	cfg.Open = func(t *testing.T, name, dir string) (queue.Queue, dedupe.Store) {
		q, s := open(t, name, dir)
		_ = q.Close()
		q, err := queue.OpenSQLite(filepath.Join(dir, "gateway.db"), queue.SQLiteConfig{PollInterval: 50 * time.Millisecond})
		require.NoError(t, err)
		return q, s
	}
	r := durabletest.Kill(t, cfg)
	if os.Getenv("DURABLETEST_KILL_PHASE") != "" {
		return
	}
	require.Equal(t, r.Accepted, r.Processed)
	require.Zero(t, r.Doubles)
	require.Zero(t, r.Lost)
	require.Positive(t, r.Interrupted)
	require.Less(t, r.Recovery, time.Minute, "the killed workers' messages ran again within a minute")
}

// TestSQLiteQueuePoison sends a gateway that queues there a message whose handler
// kills its process: the message is failed after its three attempts, three
// processes killed, and the gateway lives on.
func TestSQLiteQueuePoison(t *testing.T) {
	durabletest.Poison(t, sqliteKillConfig())
}

// sqliteKillConfig is the deployment that Kill and Poison crash.
func sqliteKillConfig() durabletest.KillConfig {
	return durabletest.KillConfig{
		Open: func(t *testing.T, name, dir string) (queue.Queue, dedupe.Store) {
			path := filepath.Join(dir, "gateway.db")
			q, err := queue.OpenSQLite(path, queue.SQLiteConfig{
				Visibility: time.Second, PollInterval: 50 * time.Millisecond,
			})
			require.NoError(t, err)
			s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
			require.NoError(t, err)
			return q, s
		},
	}
}
