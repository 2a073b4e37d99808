package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

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
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
}

func countRows(t *testing.T, pool *pgxpool.Pool, s *Store, where string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+s.table+` WHERE `+where).Scan(&n); err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	if tag.RowsAffected() != batch {
		t.Fatalf("one cleanup statement deleted %d rows, want a batch of %d", tag.RowsAffected(), batch)
	}
	if n := countRows(t, pool, s, `key LIKE 'seed:old-mark-%'`); n != 7 {
		t.Fatalf("%d hour-old marks left after the first batch, want 7 (oldest first)", n)
	}

	// CleanupExpired loops over batches until one is not full.
	n, err := s.CleanupExpired(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 15 {
		t.Fatalf("CleanupExpired = %d, want the 15 expired rows left", n)
	}
	if left := countRows(t, pool, s, `true`); left != 8 {
		t.Fatalf("%d rows left, want the 8 live ones", left)
	}
	for i := range 5 {
		k := dedupe.Key{Channel: "seed", MessageID: fmt.Sprintf("live-mark-%d", i)}
		if ok, err := s.Exists(ctx, k); err != nil || !ok {
			t.Fatalf("Exists(%s) after cleanup = %v, %v", k, ok, err)
		}
	}
	if n, err := s.CleanupExpired(ctx); err != nil || n != 0 {
		t.Fatalf("second CleanupExpired = %d, %v; want 0", n, err)
	}

	// A batch of exactly the number of expired rows needs a second, empty
	// statement to see that it is done.
	seed(t, pool, s, "exact", 2*batch, -time.Minute, false)
	if n, err := s.CleanupExpired(ctx); err != nil || n != 2*batch {
		t.Fatalf("CleanupExpired of %d rows = %d, %v", 2*batch, n, err)
	}

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.CleanupExpired(cancelled); !errors.Is(err, context.Canceled) {
		t.Fatalf("CleanupExpired with a cancelled context = %v", err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seed(t, pool, s, "swept", 30, -time.Minute, false)
	seed(t, pool, s, "kept", 3, time.Hour, false)
	var total int64
	for total < 30 {
		select {
		case n := <-swept:
			total += n
		case <-time.After(30 * time.Second):
			t.Fatalf("the sweeper deleted %d of 30 expired rows in 30 s", total)
		}
	}
	if total != 30 {
		t.Fatalf("the sweeper deleted %d rows, want 30", total)
	}
	if left := countRows(t, pool, s, `true`); left != 3 {
		t.Fatalf("%d rows left, want the 3 live ones", left)
	}
	// The sweeper has run, so its goroutine is in the dump.
	if got := sweepers(); got != before+1 {
		t.Fatalf("%d sweeper goroutines with the store open, want %d", got, before+1)
	}

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.done:
	default:
		t.Fatal("Close returned before the sweeper did")
	}
	if n := rec.count("dedupe: postgres: background cleanup failed"); n > 0 {
		t.Errorf("%d sweeps failed", n)
	}
	// The goroutine signals done in its last deferred call, and then it can only
	// exit: it must leave the dump without any wait for time to pass.
	for deadline := time.Now().Add(10 * time.Second); sweepers() != before; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("%d sweeper goroutines 10 s after Close, want %d", sweepers(), before)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestCloseStopsBlockedSweep checks that Close cancels a sweep blocked in the
// server instead of waiting for it: another transaction holds an exclusive
// lock on the table until Close has returned.
func TestCloseStopsBlockedSweep(t *testing.T) {
	pool := newPool(t, "", 0)
	table := testTable(t)
	ctx := context.Background()
	s, err := New(ctx, pool, Config{Table: table, CleanupInterval: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	blocker := adminConn(t)
	tx, err := blocker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE `+table+` IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// Wait until a sweep is waiting on the lock.
	admin := adminConn(t)
	for waiting := false; !waiting; {
		err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE wait_event_type = 'Lock' AND query LIKE 'DELETE FROM "`+table+`"%')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // polling the server, not waiting out a TTL
	}
	closed := make(chan struct{})
	go func() { _ = s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s while a sweep was blocked")
	}
	select {
	case <-s.done:
	default:
		t.Fatal("Close returned before the sweeper did")
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
	if _, err := pool.Exec(ctx, `ANALYZE `+s.table); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) // EXPLAIN ANALYZE runs the DELETE
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	if err := tx.QueryRow(ctx, `EXPLAIN (ANALYZE, FORMAT JSON) `+s.sql.cleanup, batch).Scan(&plan); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 {
		t.Fatalf("EXPLAIN returned %d plans", len(plan))
	}
	usesExpiryIndex := false
	var walk func(n planNode)
	walk = func(n planNode) {
		if n.Rows > batch {
			t.Errorf("plan node %s (%s) handles %v rows, more than a batch of %d", n.Type, n.Index, n.Rows, batch)
		}
		if strings.HasSuffix(n.Index, indexSuffix) {
			usesExpiryIndex = true
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(plan[0].Plan)
	if !usesExpiryIndex {
		t.Errorf("the cleanup statement does not use the expiry index")
	}
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
