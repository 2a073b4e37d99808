package postgres_test

import (
	"context"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp/durabletest"
	"github.com/gatewaykit/dedupe/postgres"
	"github.com/gatewaykit/dedupe/queue/queuetest"
)

// queuePool returns a pool on the server of DEDUPE_POSTGRES_DSN, closed at
// the end of the test, or skips the test (fails it when
// DEDUPE_REQUIRE_SERVERS=1).
func queuePool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), postgres.ServerDSN(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// dropAtEnd drops table at the end of the test.
func dropAtEnd(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, `DROP TABLE IF EXISTS "`+table+`"`)
	})
}

func TestQueueConformance(t *testing.T) {
	pool := queuePool(t)
	queuetest.Run(t, queuetest.Config{
		New: func(t *testing.T, o queuetest.Options) queue.Queue {
			table := "dedupe_test_queue_" + strings.ToLower(rand.Text()[:10])
			q, err := postgres.NewQueue(t.Context(), pool, postgres.QueueConfig{
				Table: table, Visibility: o.Visibility, Retention: o.Retention, MaxDepth: o.MaxDepth,
				PollInterval: 20 * time.Millisecond,
			})
			require.NoError(t, err)
			dropAtEnd(t, pool, table)
			return q
		},
	})
}

// TestQueueKill kills a gateway whose Async queues in PostgreSQL while
// handlers run, restarts it, and finds every accepted message processed
// exactly once. The marks are in PostgreSQL too.
func TestQueueKill(t *testing.T) {
	queuePool(t) // skips without a server
	durabletest.Kill(t, postgresKillConfig())
}

// TestQueuePoison sends a gateway that queues there a message whose handler
// kills its process: the message is failed after its three attempts, three
// processes killed, and the gateway lives on.
func TestQueuePoison(t *testing.T) {
	queuePool(t) // skips without a server
	durabletest.Poison(t, postgresKillConfig())
}

// postgresKillConfig is the deployment that Kill and Poison crash.
func postgresKillConfig() durabletest.KillConfig {
	return durabletest.KillConfig{
		Open: func(t *testing.T, name, _ string) (queue.Queue, dedupe.Store) {
			pool := queuePool(t)
			q, err := postgres.NewQueue(context.Background(), pool, postgres.QueueConfig{
				Table: name + "_queue", Visibility: time.Second, PollInterval: 50 * time.Millisecond,
			})
			require.NoError(t, err)
			s, err := postgres.New(context.Background(), pool, postgres.Config{Table: name + "_marks"})
			require.NoError(t, err)
			return q, s
		},
		Drop: func(t *testing.T, name string) {
			pool := queuePool(t)
			_, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+name+`_queue", "`+name+`_marks"`)
		},
	}
}

// TestQueueUpgrade: a table written by an earlier version, without the
// reason column, is upgraded in place; its rows are kept.
func TestQueueUpgrade(t *testing.T) {
	pool := queuePool(t)
	ctx := t.Context()
	table := "dedupe_test_upgrade_" + strings.ToLower(rand.Text()[:10])
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TABLE IF EXISTS "`+table+`"`) })
	_, err := pool.Exec(ctx, `CREATE TABLE "`+table+`" (
	id text PRIMARY KEY, key text NOT NULL, state smallint NOT NULL,
	attempts integer NOT NULL DEFAULT 0, receipt text, visible_at timestamptz NOT NULL,
	accepted_at timestamptz NOT NULL, updated_at timestamptz NOT NULL, data bytea)`)
	require.NoError(t, err)
	m := queue.Message{ID: "old", Key: dedupe.Key{Channel: "c", MessageID: "1"}, Method: "POST", Target: "/"}
	data, err := m.MarshalBinary()
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO "`+table+`" (id, key, state, visible_at, accepted_at, updated_at, data)
VALUES ($1, $2, 1, now(), now(), now(), $3)`, m.ID, m.Key.String(), data)
	require.NoError(t, err)
	for range 2 { // the second finds the column
		q, err := postgres.NewQueue(ctx, pool, postgres.QueueConfig{Table: table, PollInterval: 20 * time.Millisecond})
		require.NoError(t, err)
		d, err := q.Take(ctx)
		require.NoError(t, err)
		require.NoError(t, q.Update(ctx, d, queue.Change{State: queue.StateFailed, Reason: "why"}))
		e, ok, err := q.Status(ctx, "old")
		require.NoError(t, err, "Status")
		require.True(t, ok, "Status = %+v", e)
		require.Equal(t, "why", e.Reason, "Status = %+v", e)
		ok, err = q.Requeue(ctx, "old")
		require.NoError(t, err, "Requeue")
		require.True(t, ok, "Requeue")
	}
}
