package deduperedis_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
)

// workload runs workers that each take fresh keys through Claim and then Mark
// (or, for every fourth key, Release, as after a failed delivery), and records
// what the callers were told, so that a fault injected meanwhile can be checked
// against what Redis holds afterwards.
type workload struct {
	st *deduperedis.Store

	ok       atomic.Int64 // keys taken through Claim and Mark or Release without error
	errors   atomic.Int64 // calls that returned an error
	falseDup atomic.Int64 // Claims of fresh keys answered Duplicate
	inFlight atomic.Int64 // Claims of fresh keys answered InFlight

	mu       sync.Mutex
	marked   []dedupe.Key // Mark returned nil: must exist afterwards
	unmarked []dedupe.Key // never marked (Claim failed, or released): must not be a duplicate
	firstErr error

	stop chan struct{}
	wg   sync.WaitGroup
}

func startWorkload(t *testing.T, st *deduperedis.Store, workers int) *workload {
	w := &workload{st: st, stop: make(chan struct{})}
	id := randomID(t)
	for g := range workers {
		w.wg.Add(1)
		go w.run(fmt.Sprintf("%s-%d", id, g))
	}
	t.Cleanup(w.halt)
	return w
}

func (w *workload) run(id string) {
	defer w.wg.Done()
	ctx := context.Background()
	for n := 0; ; n++ {
		select {
		case <-w.stop:
			return
		default:
		}
		k := dedupe.Key{Channel: "fault", MessageID: fmt.Sprintf("%s-%d", id, n)}
		c, cSt, err := claimNew(ctx, w.st, k, time.Minute)
		if err != nil {
			w.fail(err, k, false)
			continue
		}
		switch cSt {
		case dedupe.Duplicate:
			w.falseDup.Add(1)
			continue
		case dedupe.InFlight:
			w.inFlight.Add(1)
			continue
		}
		if n%4 == 3 {
			if err := w.st.Release(ctx, c); err != nil {
				w.fail(err, k, false)
				continue
			}
			w.record(&w.unmarked, k)
		} else {
			if err := w.st.Mark(ctx, k, time.Minute); err != nil {
				w.fail(err, k, true)
				continue
			}
			w.record(&w.marked, k)
		}
		w.ok.Add(1)
	}
}

// fail records an error of a call on k. A failed Mark may or may not have
// landed, so its key is checked for neither outcome.
func (w *workload) fail(err error, k dedupe.Key, markFailed bool) {
	w.errors.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstErr == nil {
		w.firstErr = err
	}
	if !markFailed {
		w.unmarked = append(w.unmarked, k)
	}
}

func (w *workload) record(list *[]dedupe.Key, k dedupe.Key) {
	w.mu.Lock()
	*list = append(*list, k)
	w.mu.Unlock()
}

// halt stops the workers and waits for them. It may be called twice.
func (w *workload) halt() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
}

// waitFor waits until cond holds, failing the test after timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			require.Failf(t, "timed out", "after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// check stops the workload and checks Redis against what callers were told:
// no Claim of a fresh key said Duplicate (or InFlight: a retried claim
// recognises its own token), every acknowledged mark is there, and no key that
// was never marked reads as a duplicate.
func (w *workload) check(t *testing.T) {
	t.Helper()
	w.halt()
	t.Logf("%d keys processed, %d errors (first: %v), %d marks to check, %d unmarked keys",
		w.ok.Load(), w.errors.Load(), w.firstErr, len(w.marked), len(w.unmarked))
	assert.Zero(t, w.falseDup.Load(), "claims of fresh keys were answered Duplicate")
	assert.Zero(t, w.inFlight.Load(), "claims of fresh keys were answered InFlight")
	ctx := context.Background()
	for _, k := range w.marked {
		ok, err := w.st.Exists(ctx, k)
		assert.NoError(t, err, "acknowledged mark of %s: Exists", k)
		assert.True(t, ok, "acknowledged mark of %s lost", k)
	}
	for _, k := range w.unmarked {
		ok, err := w.st.Exists(ctx, k)
		assert.NoError(t, err, "%s was never marked: Exists", k)
		assert.False(t, ok, "%s was never marked but Exists", k)
		_, cSt, err := claimNew(ctx, w.st, k, time.Minute)
		assert.NoError(t, err, "%s was never marked: Claim", k)
		assert.NotEqual(t, dedupe.Duplicate, cSt, "%s was never marked but Claim", k)
	}
}

// TestConnectionKill cuts the store's connections with CLIENT KILL while
// workers run, with the client's retries on and off.
func TestConnectionKill(t *testing.T) {
	addr := redisAddr(t)
	for _, tc := range []struct {
		name       string
		maxRetries int
	}{
		{"retries", 0}, // go-redis's default, 3
		{"noretries", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "dedupe-kill-" + randomID(t)
			client := newClient(t, addr, func(o *redis.Options) {
				o.ClientName = name
				o.MaxRetries = tc.maxRetries
			})
			admin := newClient(t, addr, nil)
			st := newStore(t, client, deduperedis.Config{})
			w := startWorkload(t, st, 8)

			kills := 0
			for round := 0; round < 100 && (round < 5 || tc.maxRetries < 0 && w.errors.Load() == 0); round++ {
				before := w.ok.Load()
				waitFor(t, "progress", 20*time.Second, func() bool { return w.ok.Load() >= before+20 })
				kills += killClients(t, admin, name)
			}
			before := w.ok.Load()
			waitFor(t, "progress after the last kill", 20*time.Second, func() bool { return w.ok.Load() >= before+100 })
			w.check(t)
			t.Logf("%d connections killed", kills)
			assert.NotZero(t, kills, "no connection was killed")
			if tc.maxRetries < 0 {
				assert.NotZero(t, w.errors.Load(), "no caller saw an error although the client does not retry")
			}
		})
	}
}

// killClients kills the connections whose client name is name and returns
// how many it killed. Other clients of the server are left alone.
func killClients(t *testing.T, admin *redis.Client, name string) int {
	t.Helper()
	ctx := context.Background()
	list, err := admin.ClientList(ctx).Result()
	require.NoError(t, err, "CLIENT LIST")
	n := 0
	for _, line := range strings.Split(list, "\n") {
		var id, cname string
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "id="); ok {
				id = v
			} else if v, ok := strings.CutPrefix(f, "name="); ok {
				cname = v
			}
		}
		if id == "" || cname != name {
			continue
		}
		if err := admin.Do(ctx, "CLIENT", "KILL", "ID", id).Err(); err == nil {
			n++
		}
	}
	return n
}

// TestServerRestart kills a private redis-server with SIGKILL while workers
// run, keeps it down until callers have seen errors, and starts it again on the
// same port and data directory. The server runs with appendfsync always, so a
// mark acknowledged before the kill must survive it; the same Store must work
// again without being re-created.
func TestServerRestart(t *testing.T) {
	redisAddr(t)
	srv := startServer(t, "--appendonly", "yes", "--appendfsync", "always")
	client := newClient(t, srv.Addr(), func(o *redis.Options) {
		o.DialTimeout = time.Second
		o.ReadTimeout = 2 * time.Second
	})
	st := newStore(t, client, deduperedis.Config{})
	w := startWorkload(t, st, 8)

	waitFor(t, "progress before the kill", 20*time.Second, func() bool { return w.ok.Load() >= 200 })
	srv.kill()
	errs := w.errors.Load()
	waitFor(t, "errors during the outage", 30*time.Second, func() bool { return w.errors.Load() >= errs+8 })
	okDown := w.ok.Load()
	srv.restart()
	waitFor(t, "progress after the restart", 30*time.Second, func() bool { return w.ok.Load() >= okDown+200 })
	w.check(t)
}

// TestDeduperStorm runs Deduper.Do through a TCP proxy in front of Redis that
// drops replies for a while and then cuts the connections, round after round,
// with deadlines of 0 to 5 ms: no message may run twice, and none may be left
// stranded by the claim of a call that failed.
func TestDeduperStorm(t *testing.T) {
	p, err := faultproxy.Start(redisAddr(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	client := newClient(t, p.Addr(), nil)
	st := newStore(t, client, deduperedis.Config{})
	d := dedupe.New(st, dedupe.WithLease(time.Hour))
	t.Cleanup(func() { _ = d.Close() })
	f := faultproxy.Storm{}.Run(t, d, p, randomID(t))
	t.Log(f)
}
