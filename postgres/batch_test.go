package postgres

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
)

// until waits, yielding, until cond holds, failing the test after 10 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); runtime.Gosched() {
		if time.Now().After(deadline) {
			require.Failf(t, "timed out", "waiting for %s", what)
		}
	}
}

func queued(s *Store) int {
	return s.b.Queued()
}

// batchResult is the outcome of one call of a batch.
type batchResult struct {
	status dedupe.Status
	err    error
}

// namedCall is one call of a batch.
type namedCall struct {
	name string
	f    func() (dedupe.Status, error)
}

// inOneBatch runs calls in one batch of s: it makes all round trips of s wait
// on a row lock, queues the calls in order, and then lets the lock go.
func inOneBatch(t *testing.T, s *Store, app string, calls []namedCall) map[string]batchResult {
	t.Helper()
	ctx := context.Background()
	admin := adminConn(t)
	block := dedupe.Key{Channel: "block", MessageID: randomHex(t, 4)}
	rollback := lockRow(t, s.table, block)
	blocked := make(chan error, roundsInFlight)
	for range roundsInFlight {
		go func() {
			_, _, err := claimNew(ctx, s, block, time.Minute)
			blocked <- err
		}()
	}
	until(t, "every round trip waiting on the lock", func() bool {
		var n int
		err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE application_name = $1 AND wait_event_type = 'Lock'`, app).Scan(&n)
		return err == nil && n == roundsInFlight
	})
	type named struct {
		name string
		batchResult
	}
	results := make(chan named, len(calls))
	for i, c := range calls {
		go func() {
			st, err := c.f()
			results <- named{c.name, batchResult{st, err}}
		}()
		until(t, "the call queued", func() bool { return queued(s) == i+1 })
	}
	rollback()
	got := map[string]batchResult{}
	for range calls {
		r := <-results
		got[r.name] = r.batchResult
	}
	for range roundsInFlight {
		assert.NoError(t, <-blocked, "blocked claim")
	}
	return got
}

// TestBatchIsolation sends batches that claim one key twice, with and
// without a statement that fails: exactly one of the two claims wins, the
// failing call alone fails, and the others succeed.
func TestBatchIsolation(t *testing.T) {
	app := "dedupe_batch_" + randomHex(t, 4)
	pool := newPool(t, app, 2*roundsInFlight)
	ctx := context.Background()
	table := testTable(t)
	// A table a migration made, with a check that fails the marks of poison keys.
	_, err := adminConn(t).Exec(ctx, `CREATE TABLE `+table+` (key text COLLATE "C" PRIMARY KEY, token text,
	expires_at timestamptz NOT NULL, CHECK (token IS NOT NULL OR key NOT LIKE 'poison:%'))`)
	require.NoError(t, err)
	rec := newRecorder()
	s := newTestStore(t, pool, Config{Table: table, Logger: rec.logger()})
	claim := func(k dedupe.Key) func() (dedupe.Status, error) {
		return func() (dedupe.Status, error) { _, st, err := claimNew(ctx, s, k, time.Minute); return st, err }
	}
	mark := func(k dedupe.Key) func() (dedupe.Status, error) {
		return func() (dedupe.Status, error) { return 0, s.Mark(ctx, k, time.Hour) }
	}
	for _, poison := range []bool{false, true} {
		t.Run(fmt.Sprintf("poison=%v", poison), func(t *testing.T) {
			id := randomHex(t, 4)
			twice := dedupe.Key{Channel: "twice", MessageID: id}
			other := dedupe.Key{Channel: "other", MessageID: id}
			bad := dedupe.Key{Channel: "poison", MessageID: id}
			calls := []namedCall{{"claim 1", claim(twice)}, {"claim 2", claim(twice)}, {"mark other", mark(other)}}
			if poison {
				calls = append(calls[:1], append([]namedCall{{"mark poison", mark(bad)}}, calls[1:]...)...)
			}
			before := rec.count(msgOneByOne)
			got := inOneBatch(t, s, app, calls)
			for _, name := range []string{"claim 1", "claim 2", "mark other"} {
				assert.NoError(t, got[name].err, name)
			}
			assert.Equal(t, dedupe.Claimed, got["claim 1"].status, "the first of two claims of one key in one batch")
			assert.Equal(t, dedupe.InFlight, got["claim 2"].status, "the second of two claims of one key in one batch")
			ok, err := s.Exists(ctx, other)
			assert.NoError(t, err, "Exists of the other mark")
			assert.True(t, ok, "Exists of the other mark")
			wantOneByOne := 0
			if poison {
				wantOneByOne = 1
				var pgErr *pgconn.PgError
				err := got["mark poison"].err
				if assert.ErrorAs(t, err, &pgErr, "Mark of a poison key: want the check violation") {
					assert.Equal(t, "23514", pgErr.Code, "Mark of a poison key: %v", err)
					assert.True(t, strings.HasPrefix(err.Error(), "dedupe: postgres: mark "+bad.String()+": "),
						"Mark of a poison key = %v", err)
				}
			}
			assert.Equal(t, wantOneByOne, rec.count(msgOneByOne)-before, "batches sent again one by one")
		})
	}
}

// stuckStore returns a store whose pool reaches the server through a proxy,
// with all of its round trips in flight and their replies swallowed, so that
// the next calls queue. The calls in flight end with an error once the proxy
// cuts them; their results arrive on the returned channel.
func stuckStore(t *testing.T) (*Store, *faultproxy.Proxy, <-chan error) {
	t.Helper()
	pool, p := proxyPool(t, 2*roundsInFlight)
	s := newTestStore(t, pool, Config{})
	ctx := context.Background()
	_, err := s.Exists(ctx, dedupe.Key{Channel: "warm", MessageID: "1"})
	require.NoError(t, err)
	p.DropReplies(true)
	stuck := make(chan error, roundsInFlight)
	// One call at a time, each in a round trip of its own that went silent
	// before the next starts: two calls gathered in one round would leave a
	// round free, and the test's next call would be sent.
	for i := range roundsInFlight {
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			_, err := s.Exists(ctx, dedupe.Key{Channel: "stuck", MessageID: fmt.Sprint(i)})
			stuck <- err
		}()
		until(t, "a silent round trip", func() bool { return p.Stats().Silenced >= i+1 })
	}
	return s, p, stuck
}

// TestQueuedCallGivenUp checks that a call whose context ends while it waits
// for a round trip returns at once with the context's error, and is never
// sent.
func TestQueuedCallGivenUp(t *testing.T) {
	s, p, stuck := stuckStore(t)
	k := dedupe.Key{Channel: "queued", MessageID: randomHex(t, 4)}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := s.Mark(ctx, k, time.Hour)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Mark queued past its deadline")
	require.ErrorContains(t, err, "not sent", "Mark queued past its deadline")
	p.DropReplies(false)
	p.Cut()
	for range roundsInFlight {
		assert.Error(t, <-stuck, "a call whose connection was cut succeeded")
	}
	admin := adminConn(t)
	var n int
	require.NoError(t, admin.QueryRow(context.Background(), `SELECT count(*) FROM `+s.table+` WHERE key = $1`, k.String()).Scan(&n))
	require.Equal(t, 0, n, "rows of the given-up mark")
}

// TestCloseWithCallsQueued checks that Close answers queued calls with
// ErrClosed at once, without sending them, and returns once the round trips
// in flight are answered.
func TestCloseWithCallsQueued(t *testing.T) {
	s, p, stuck := stuckStore(t)
	q := make(chan error, 1)
	go func() { q <- s.Mark(context.Background(), dedupe.Key{Channel: "queued", MessageID: "2"}, time.Hour) }()
	until(t, "a queued call", func() bool { return queued(s) == 1 })
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	require.ErrorIs(t, <-q, dedupe.ErrClosed, "queued Mark at Close")
	select {
	case err := <-closed:
		require.Failf(t, "Close returned early", "Close returned %v with round trips in flight", err)
	default:
	}
	p.DropReplies(false)
	p.Cut()
	require.NoError(t, <-closed)
	for range roundsInFlight {
		<-stuck
	}
}
