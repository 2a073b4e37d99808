package deduperedis_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
)

// until waits, yielding, until cond holds, failing the test after 10 s.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
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
	if err != nil {
		t.Fatal(err)
	}
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
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "not sent") {
		t.Fatalf("Mark queued past its deadline = %v, want DeadlineExceeded, not sent", err)
	}
	p.DropReplies(false)
	p.Cut()
	for range deduperedis.RoundsInFlight {
		if err := <-stuck; err == nil {
			t.Error("a call whose connection was cut succeeded")
		}
	}
	// The store works again, and the given-up Mark never reached Redis.
	if ok, err := st.Exists(context.Background(), k); ok || err != nil {
		t.Fatalf("Exists of the given-up mark = %v, %v", ok, err)
	}
	direct := newClient(t, redisAddr(t), nil)
	if n, err := direct.Exists(context.Background(), prefix+k.String()).Result(); n != 0 || err != nil {
		t.Fatalf("EXISTS %s = %d, %v", k, n, err)
	}
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
	if err := <-queued; !errors.Is(err, dedupe.ErrClosed) {
		t.Fatalf("queued Mark at Close = %v, want ErrClosed", err)
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v with round trips in flight", err)
	default:
	}
	p.DropReplies(false)
	p.Cut()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	for range deduperedis.RoundsInFlight {
		<-stuck
	}
	if _, err := st.Exists(context.Background(), dedupe.Key{Channel: "x", MessageID: "1"}); !errors.Is(err, dedupe.ErrClosed) {
		t.Fatalf("Exists after Close = %v", err)
	}
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
		if err := client.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Go(func() {
				k := dedupe.Key{Channel: "noscript", MessageID: fmt.Sprint(round, "-", i)}
				c := dedupe.NewClaim(k)
				if status, err := st.Claim(ctx, c, time.Minute); status != dedupe.Claimed || err != nil {
					t.Errorf("Claim(%s) = %v, %v", k, status, err)
					return
				}
				if err := st.Extend(ctx, c, time.Minute); err != nil {
					t.Errorf("Extend(%s): %v", k, err)
				}
				if err := st.Release(ctx, c); err != nil {
					t.Errorf("Release(%s): %v", k, err)
				}
			})
		}
		wg.Wait()
	}
	// Each flush made some calls fall back on EVAL.
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var evals int
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(line, "cmdstat_eval:calls="); ok {
			fmt.Sscan(strings.SplitN(v, ",", 2)[0], &evals)
		}
	}
	if evals < 3 {
		t.Errorf("%d EVAL calls after 3 flushes of the script cache, want at least 3", evals)
	}
	t.Logf("%d calls fell back on EVAL", evals)
}
