package queue_test

import (
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
