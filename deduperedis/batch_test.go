package deduperedis_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
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

// stuckStore returns a store whose client reaches Redis through a proxy,
// with all of its round trips in flight and their replies swallowed, so that
// the next calls queue. The calls in flight end with an error once the
// proxy cuts them; their results arrive on the returned channel. The client
// has hooks, if any.
func stuckStore(t *testing.T, hooks ...redis.Hook) (*deduperedis.Store, *faultproxy.Proxy, <-chan error, string) {
	t.Helper()
	p, err := faultproxy.Start(redisAddr(t))
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	client := newClient(t, p.Addr(), func(o *redis.Options) {
		o.MaxRetries = -1
		o.ReadTimeout = 30 * time.Second
		o.PoolSize = 2 * deduperedis.RoundsInFlight
	})
	for _, h := range hooks {
		client.AddHook(h)
	}
	prefix := "dedupe-test:" + randomID(t) + ":"
	st := newStore(t, client, deduperedis.Config{Prefix: prefix})
	require.NoError(t, st.Ping(context.Background()), "Ping: the layout check, before the round trips go silent")
	// The Ping's connection would wait idle in the pool, and a test's Cut
	// could close it under the round its freed calls are sent in. Cut it now:
	// the pool drops it as unhealthy, and each stuck round dials its own.
	p.Cut()
	p.DropReplies(true)
	stuck := make(chan error, deduperedis.RoundsInFlight)
	// One call at a time, each in a round trip of its own that went silent
	// before the next starts: two calls gathered in one round would leave a
	// round free, and the test's next call would be sent.
	for i := range deduperedis.RoundsInFlight {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := st.Exists(ctx, dedupe.Key{Channel: "stuck", MessageID: fmt.Sprint(i)})
			stuck <- err
		}()
		until(t, "a silent round trip", func() bool { return p.Stats().Silenced >= i+1 })
	}
	return st, p, stuck, prefix
}

// TestQueuedCallGivenUp checks that a call whose context ends while it waits
// for a round trip returns at once with the context's error, and is never
// sent.
func TestQueuedCallGivenUp(t *testing.T) {
	st, p, stuck, prefix := stuckStore(t)
	k := dedupe.Key{Channel: "queued", MessageID: "1"}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err := st.Mark(ctx, k, time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Mark queued past its deadline")
	require.ErrorContains(t, err, "not sent", "Mark queued past its deadline")
	p.DropReplies(false)
	p.Cut()
	for range deduperedis.RoundsInFlight {
		assert.Error(t, <-stuck, "a call whose connection was cut succeeded")
	}
	// The store works again, and the given-up Mark never reached Redis.
	ok, err := st.Exists(context.Background(), k)
	require.NoError(t, err, "Exists of the given-up mark")
	require.False(t, ok, "Exists of the given-up mark")
	direct := newClient(t, redisAddr(t), nil)
	n, err := direct.Exists(context.Background(), prefix+k.String()).Result()
	require.NoError(t, err, "EXISTS %s", k)
	require.Zero(t, n, "EXISTS %s", k)
}

// TestCloseWithCallsQueued checks that Close answers queued calls with
// ErrClosed at once, without sending them, and returns once the round trips
// in flight are answered.
func TestCloseWithCallsQueued(t *testing.T) {
	st, p, stuck, _ := stuckStore(t)
	queued := make(chan error, 1)
	go func() {
		queued <- st.Mark(context.Background(), dedupe.Key{Channel: "queued", MessageID: "2"}, time.Minute)
	}()
	until(t, "a queued call", func() bool { return deduperedis.Queued(st) == 1 })
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	require.ErrorIs(t, <-queued, dedupe.ErrClosed, "queued Mark at Close")
	select {
	case err := <-closed:
		require.Failf(t, "Close returned with round trips in flight", "Close returned %v", err)
	default:
	}
	p.DropReplies(false)
	p.Cut()
	require.NoError(t, <-closed)
	for range deduperedis.RoundsInFlight {
		<-stuck
	}
	_, err := st.Exists(context.Background(), dedupe.Key{Channel: "x", MessageID: "1"})
	require.ErrorIs(t, err, dedupe.ErrClosed, "Exists after Close")
}

// TestNoScript flushes the server's script cache under concurrent calls:
// the calls whose EVALSHA is answered NOSCRIPT, in pipelines or alone, are
// sent again by EVAL and succeed.
func TestNoScript(t *testing.T) {
	redisAddr(t)
	srv := startServer(t)
	client := newClient(t, srv.Addr(), nil)
	st := newStore(t, client, deduperedis.Config{})
	ctx := context.Background()
	for round := range 3 {
		require.NoError(t, client.ScriptFlush(ctx).Err())
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Go(func() {
				k := dedupe.Key{Channel: "noscript", MessageID: fmt.Sprint(round, "-", i)}
				c := dedupe.NewClaim(k)
				status, err := st.Claim(ctx, c, time.Minute)
				if !assert.NoError(t, err, "Claim(%s)", k) || !assert.Equal(t, dedupe.Claimed, status, "Claim(%s)", k) {
					return
				}
				assert.NoError(t, st.Extend(ctx, c, time.Minute), "Extend(%s)", k)
				assert.NoError(t, st.Release(ctx, c), "Release(%s)", k)
			})
		}
		wg.Wait()
	}
	// Each flush made some calls fall back on EVAL.
	info, err := client.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	var evals int
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_eval:calls="); ok {
			fmt.Sscan(strings.SplitN(v, ",", 2)[0], &evals)
		}
	}
	assert.GreaterOrEqual(t, evals, 3, "EVAL calls after 3 flushes of the script cache")
	t.Logf("%d calls fell back on EVAL", evals)
}
