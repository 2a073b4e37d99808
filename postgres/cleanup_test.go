package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// seed writes n rows with keys prefix-0 … prefix-(n-1) that expire after
// offset on the server's clock (negative: expired already); claim rows carry a
// token.
func seed(t *testing.T, pool *pgxpool.Pool, s *Store, prefix string, n int, offset time.Duration, claim bool) {
	t.Helper()
	var token *string
	if claim {
		tok := dedupe.NewClaim(dedupe.Key{Channel: "seed", MessageID: "x"}).Token
		token = &tok
	}
	_, err := pool.Exec(context.Background(), `INSERT INTO `+s.table+` (key, token, expires_at)
SELECT 'seed:' || $1::text || '-' || i, $2::text, now() + $3::bigint * interval '1 microsecond'
FROM generate_series(0, $4::int - 1) AS i`, prefix, token, micros(offset), n)
	require.NoError(t, err, "seed")
}

func countRows(t *testing.T, pool *pgxpool.Pool, s *Store, where string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM `+s.table+` WHERE `+where).Scan(&n))
	return n
}

func TestCleanupExpired(t *testing.T) {
	pool := newPool(t, "", 0)
	ctx := context.Background()
	const batch = 10
	s := newTestStore(t, pool, Config{CleanupBatch: batch})
	seed(t, pool, s, "old-mark", 17, -time.Hour, false)
	seed(t, pool, s, "old-claim", 8, -time.Second, true)
	seed(t, pool, s, "live-mark", 5, time.Hour, false)
	seed(t, pool, s, "live-claim", 3, time.Hour, true)

	// One statement deletes at most a batch, the earliest expiries first.
	tag, err := pool.Exec(ctx, s.sql.cleanup, batch)
	require.NoError(t, err)
	require.Equal(t, int64(batch), tag.RowsAffected(), "rows one cleanup statement deleted: want a batch")
	require.Equal(t, 7, countRows(t, pool, s, `key LIKE 'seed:old-mark-%'`),
		"hour-old marks left after the first batch (oldest first)")

	// CleanupExpired loops over batches until one is not full.
	n, err := s.CleanupExpired(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(15), n, "CleanupExpired: want the 15 expired rows left")
	require.Equal(t, 8, countRows(t, pool, s, `true`), "rows left: want the 8 live ones")
	for i := range 5 {
		k := dedupe.Key{Channel: "seed", MessageID: fmt.Sprintf("live-mark-%d", i)}
		ok, err := s.Exists(ctx, k)
		require.NoError(t, err, "Exists(%s) after cleanup", k)
		require.True(t, ok, "Exists(%s) after cleanup", k)
	}
	n, err = s.CleanupExpired(ctx)
	require.NoError(t, err, "second CleanupExpired")
	require.Equal(t, int64(0), n, "second CleanupExpired")

	// A batch of exactly the number of expired rows needs a second, empty
	// statement to see that it is done.
	seed(t, pool, s, "exact", 2*batch, -time.Minute, false)
	n, err = s.CleanupExpired(ctx)
	require.NoError(t, err, "CleanupExpired of %d rows", 2*batch)
	require.Equal(t, int64(2*batch), n, "CleanupExpired of %d rows", 2*batch)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.CleanupExpired(cancelled)
	require.ErrorIs(t, err, context.Canceled, "CleanupExpired with a cancelled context")
}

// sweepers counts the goroutines running the sweeper of any store.
func sweepers() int {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 2)
	return strings.Count(b.String(), "postgres.(*Store).sweep")
}

// TestSweeper checks that the background cleanup deletes expired rows, and
// that Close stops its goroutine and waits for it.
func TestSweeper(t *testing.T) {
	pool := newPool(t, "", 0)
	table := testTable(t)
	before := sweepers()
	swept := make(chan int64, 100)
	rec := newRecorder()
	rec.sweeps = swept
	s, err := New(context.Background(), pool, Config{Table: table, CleanupInterval: 10 * time.Millisecond, Logger: rec.logger()})
	require.NoError(t, err)
	defer s.Close()
	seed(t, pool, s, "swept", 30, -time.Minute, false)
	seed(t, pool, s, "kept", 3, time.Hour, false)
	var total int64
	for total < 30 {
		select {
		case n := <-swept:
			total += n
		case <-time.After(30 * time.Second):
			require.Failf(t, "sweeper too slow", "the sweeper deleted %d of 30 expired rows in 30 s", total)
		}
	}
	require.Equal(t, int64(30), total, "rows the sweeper deleted")
	require.Equal(t, 3, countRows(t, pool, s, `true`), "rows left: want the 3 live ones")
	// The sweeper has run, so its goroutine is in the dump.
	require.Equal(t, before+1, sweepers(), "sweeper goroutines with the store open")

	require.NoError(t, s.Close())
	select {
	case <-s.done:
	default:
		require.Fail(t, "Close returned before the sweeper did")
	}
	assert.Zero(t, rec.count("dedupe: postgres: background cleanup failed"), "sweeps failed")
	// The goroutine signals done in its last deferred call, and then it can only
	// exit: it must leave the dump without any wait for time to pass.
	for deadline := time.Now().Add(10 * time.Second); sweepers() != before; runtime.Gosched() {
		if time.Now().After(deadline) {
			require.Failf(t, "sweeper goroutine left", "%d sweeper goroutines 10 s after Close, want %d", sweepers(), before)
		}
	}
	require.NoError(t, s.Close(), "second Close")
}

// TestCloseStopsBlockedSweep checks that Close cancels a sweep blocked in the
// server instead of waiting for it: another transaction holds an exclusive
// lock on the table until Close has returned.
func TestCloseStopsBlockedSweep(t *testing.T) {
	pool := newPool(t, "", 0)
	table := testTable(t)
	ctx := context.Background()
	s, err := New(ctx, pool, Config{Table: table, CleanupInterval: time.Millisecond})
	require.NoError(t, err)
	defer s.Close()
	blocker := adminConn(t)
	tx, err := blocker.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx)
	_, err = tx.Exec(ctx, `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`)
	require.NoError(t, err)
	// Wait until a sweep is waiting on the lock.
	admin := adminConn(t)
	for waiting := false; !waiting; {
		err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM "`+table+`"%')`).Scan(&waiting)
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond) // polling the server, not waiting out a TTL
	}
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		require.Fail(t, "Close did not return within 10 s while a sweep was blocked")
	}
	select {
	case <-s.done:
	default:
		require.Fail(t, "Close returned before the sweeper did")
	}
}

// TestCleanupPlan checks, with EXPLAIN ANALYZE on a table of many expired
// rows, that one cleanup statement reads a batch from the expiry index and no
// more: no plan node handles more rows than the batch.
func TestCleanupPlan(t *testing.T) {
	pool := newPool(t, "", 0)
	ctx := context.Background()
	s := newTestStore(t, pool, Config{})
	const expired, live, batch = 20000, 5000, 100
	seed(t, pool, s, "old", expired, -time.Hour, false)
	seed(t, pool, s, "live", live, time.Hour, false)
	_, err := pool.Exec(ctx, `ANALYZE `+s.table)
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) // EXPLAIN ANALYZE runs the DELETE
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	require.NoError(t, tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+s.sql.cleanup, batch).Scan(&plan))
	require.Len(t, plan, 1, "plans EXPLAIN returned")
	usesExpiryIndex := false
	var walk func(n planNode)
	walk = func(n planNode) {
		assert.LessOrEqual(t, n.Rows, float64(batch), "rows plan node %s (%s) handles: more than a batch", n.Type, n.Index)
		if strings.HasSuffix(n.Index, indexSuffix) {
			usesExpiryIndex = true
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plan[0].Plan)
	assert.True(t, usesExpiryIndex, "the cleanup statement does not use the expiry index")
	if t.Failed() {
		b, _ := json.MarshalIndent(plan, "", "  ")
		t.Logf("plan: %s", b)
	}
}

// planNode is the part of a node of EXPLAIN (FORMAT JSON) that TestCleanupPlan
// reads.
type planNode struct {
	Type  string     `json:"Node Type"`
	Index string     `json:"Index Name"`
	Rows  float64    `json:"Actual Rows"`
	Plans []planNode `json:"Plans"`
}
