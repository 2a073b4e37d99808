package postgres

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
)

// terminate ends every backend of the application app from the admin
// connection and returns how many it ended.
func terminate(ctx context.Context, admin *pgx.Conn, app string) (int, error) {
	var n int
	err := admin.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n)
	return n, err
}

// keyState records what the workers of TestTerminateBackends did to one key.
type keyState struct {
	markTried atomic.Bool // a Mark was called, whatever it returned
	markOK    atomic.Bool // a Mark returned nil
}

// TestTerminateBackends kills the store's connections with
// pg_terminate_backend while workers claim and mark keys. Callers see errors,
// but never a Duplicate for a key nobody marked, and never lose a mark that
// returned nil; once the killing stops, the same Store works again.
func TestTerminateBackends(t *testing.T) {
	const workers, keys, maxConns = 16, 400, 8
	app := "dedupe_fault_" + randomHex(t, 4)
	pool := newPool(t, app, maxConns)
	s := newTestStore(t, pool, Config{})
	admin := adminConn(t)
	ctx := context.Background()

	id := randomHex(t, 4)
	ks := make([]dedupe.Key, keys)
	state := make([]keyState, keys)
	for i := range ks {
		ks[i] = dedupe.Key{Channel: "fault", MessageID: fmt.Sprintf("%s-%d", id, i)}
	}
	var errCount, okCount atomic.Int64
	count := func(err error) bool {
		if err != nil {
			errCount.Add(1)
			return false
		}
		okCount.Add(1)
		return true
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			// Each key is visited by four workers, so Duplicate and InFlight occur.
			for j := range 4 * keys / workers {
				i := (w*keys/workers + j) % keys
				_, cSt, err := claimNew(ctx, s, ks[i], time.Minute)
				if !count(err) {
					continue
				}
				switch cSt {
				case dedupe.Duplicate:
					assert.True(t, state[i].markTried.Load(), "Claim(%s) = duplicate, but no Mark of it was ever called", ks[i])
				case dedupe.Claimed:
					state[i].markTried.Store(true)
					if count(s.Mark(ctx, ks[i], time.Hour)) {
						state[i].markOK.Store(true)
					}
				}
			}
		})
	}
	killWhileWorking(t, admin, app, stopped(&wg), &okCount, &errCount)
	checkAfterKills(t, s, ks, state, maxConns)
}

// killWhileWorking terminates the backends of app each time the workers
// made some progress, until they are done, and checks that callers saw errors.
func killWhileWorking(t *testing.T, admin *pgx.Conn, app string, workersDone <-chan struct{}, okCount, errCount *atomic.Int64) {
	ctx := context.Background()
	// Kill the pool's backends each time the workers have made some progress,
	// until they finish.
	progressed := func(target int64) bool { // false once the workers are done
		for okCount.Load() < target {
			select {
			case <-workersDone:
				return false
			case <-time.After(2 * time.Millisecond):
			}
		}
		select {
		case <-workersDone:
			return false
		default:
			return true
		}
	}
	killed, rounds := 0, 0
	for progressed(okCount.Load() + 150) {
		n, err := terminate(ctx, admin, app)
		require.NoError(t, err, "pg_terminate_backend")
		killed += n
		rounds++
	}
	t.Logf("%d calls succeeded, %d failed; %d backends terminated in %d rounds",
		okCount.Load(), errCount.Load(), killed, rounds)
	require.NotZero(t, killed, "the faults did not happen: %d backends terminated, %d errors", killed, errCount.Load())
	require.NotZero(t, errCount.Load(), "the faults did not happen: %d backends terminated, %d errors", killed, errCount.Load())

}

// checkAfterKills checks that the store works again once the killing stopped,
// and that every key is as the workers left it.
func checkAfterKills(t *testing.T, s *Store, ks []dedupe.Key, state []keyState, maxConns int) {
	ctx := context.Background()
	// Once the killing has stopped, the same Store works again: each connection
	// killed while idle in the pool fails at most one call before the pool
	// replaces it.
	recovered := 0
	for attempt := 0; recovered < 50; attempt++ {
		require.LessOrEqual(t, attempt, 50+maxConns, "the store did not recover: %d successes in %d calls", recovered, attempt)
		if _, err := s.Exists(ctx, ks[0]); err != nil {
			require.Zero(t, recovered, "Exists failed after %d successes: %v", recovered, err)
			continue
		}
		recovered++
	}
	for i, k := range ks {
		ok, err := s.Exists(ctx, k)
		require.NoError(t, err, "Exists(%s) after the faults", k)
		if state[i].markOK.Load() {
			assert.True(t, ok, "%s: Mark returned nil, but the mark is lost", k)
		}
		if !state[i].markTried.Load() {
			assert.False(t, ok, "%s exists, but no Mark of it was ever called", k)
		}
		_, cSt, err := claimNew(ctx, s, k, time.Minute)
		require.NoError(t, err, "Claim(%s) after the faults", k)
		if !state[i].markTried.Load() {
			assert.NotEqual(t, dedupe.Duplicate, cSt, "Claim(%s) after the faults = duplicate, but no Mark of it was ever called", k)
		}
	}
}

// stopped returns a channel closed when wg's count reaches zero.
func stopped(wg *sync.WaitGroup) <-chan struct{} {
	c := make(chan struct{})
	go func() { wg.Wait(); close(c) }()
	return c
}

// TestCancelMidQuery cancels a Claim while the server blocks it on a row lock
// held by another transaction. The call returns at once with an error that
// wraps context.Canceled, and the store keeps working.
func TestCancelMidQuery(t *testing.T) {
	app := "dedupe_cancel_" + randomHex(t, 4)
	pool := newPool(t, app, 2)
	s := newTestStore(t, pool, Config{})
	admin := adminConn(t)
	ctx := context.Background()
	k := dedupe.Key{Channel: "cancel", MessageID: randomHex(t, 4)}

	// An uncommitted insert of the key makes the claim's INSERT wait for it.
	rollback := lockRow(t, s.table, k)

	claimCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		c      dedupe.Claim
		status dedupe.Status
		err    error
	}
	res := make(chan result, 1)
	go func() {
		c, status, err := claimNew(claimCtx, s, k, time.Hour)
		res <- result{c, status, err}
	}()
	// Wait until the server reports the claim waiting on the lock.
	for waiting := false; !waiting; {
		err := admin.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
WHERE application_name = $1 AND wait_event_type = 'Lock')`, app).Scan(&waiting)
		require.NoError(t, err)
		select {
		case r := <-res:
			require.Failf(t, "Claim returned early", "Claim returned before it was cancelled: %v, %v", r.c, r.err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	var r result
	select {
	case r = <-res:
	case <-time.After(10 * time.Second):
		require.Fail(t, "Claim did not return within 10 s of its context being cancelled")
	}
	require.ErrorIs(t, r.err, context.Canceled, "cancelled Claim = %v", r.c)
	require.NotEqual(t, dedupe.Claimed, r.status, "cancelled Claim returned a claim: %+v", r.c)
	rollback()

	// The store works on, on the pool's remaining or replacement connections.
	other := dedupe.Key{Channel: "cancel", MessageID: randomHex(t, 4)}
	_, cSt, err := claimNew(ctx, s, other, time.Hour)
	require.NoError(t, err, "Claim after a cancelled one")
	require.Equal(t, dedupe.Claimed, cSt, "Claim after a cancelled one")
	// The server may still finish a statement whose client went away: the
	// cancelled claim is then held until its lease runs out, which is InFlight,
	// never Duplicate.
	_, cSt, err = claimNew(ctx, s, k, time.Hour)
	require.NoError(t, err, "Claim of the key of the cancelled claim")
	require.NotEqual(t, dedupe.Duplicate, cSt, "Claim of the key of the cancelled claim: want claimed or in flight")
	t.Logf("after the cancelled claim, the key is %v", cSt)
}

// proxyPool returns a pool on the test server whose connections go through
// a fault proxy, both closed when tb ends.
func proxyPool(tb testing.TB, maxConns int32) (*pgxpool.Pool, *faultproxy.Proxy) {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(tb))
	require.NoError(tb, err)
	p, err := faultproxy.Start(net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port))))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = p.Close() })
	host, port, _ := net.SplitHostPort(p.Addr())
	n, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Fallbacks = host, uint16(n), nil
	cfg.ConnConfig.ConnectTimeout = time.Second
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(tb, err)
	tb.Cleanup(pool.Close)
	return pool, p
}

// TestDeduperStorm runs Deduper.Do through a TCP proxy in front of
// PostgreSQL that drops replies for a while and then cuts the connections,
// round after round, with deadlines of 0 to 5 ms: no message may run twice,
// and none may be left stranded by the claim of a call that failed.
func TestDeduperStorm(t *testing.T) {
	pool, p := proxyPool(t, 16)
	s := newTestStore(t, pool, Config{})
	d := dedupe.New(s, dedupe.WithLease(time.Hour))
	t.Cleanup(func() { _ = d.Close() })
	f := faultproxy.Storm{}.Run(t, d, p, randomHex(t, 4))
	t.Log(f)
}
