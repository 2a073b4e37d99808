package deduperedis_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// TestDeduperFailover stops a private redis-server under a Deduper: without a
// fallback Do fails closed, and with one it processes each message once on
// the local store, counts it, and returns to Redis once the server is back.
func TestDeduperFailover(t *testing.T) {
	redisAddr(t)
	srv := startServer(t)
	client := newClient(t, srv.Addr(), func(o *redis.Options) {
		o.MaxRetries = 1
		o.DialerRetries = 1
		o.DialTimeout = time.Second
	})
	st := newStore(t, client, deduperedis.Config{})
	ctx := context.Background()

	// Up: Redis serves, and the fallback is not used.
	local := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	t.Cleanup(func() { _ = local.Close() })
	clock := dedupetest.NewClock(time.Now())
	d := dedupe.New(st, dedupe.WithFallback(local), dedupe.WithClock(clock.Now))
	t.Cleanup(func() { _ = d.Close() })
	up := dedupe.Key{Channel: "failover", MessageID: "up"}
	if err := d.Do(ctx, up, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("Do with the server up: %v", err)
	}
	if ok, err := st.Exists(ctx, up); !ok || err != nil {
		t.Fatalf("mark not in Redis: %v, %v", ok, err)
	}

	srv.kill()

	t.Run("FailClosed", func(t *testing.T) { testFailClosed(t, st) })
	t.Run("Fallback", func(t *testing.T) { testFallback(t, d) })
	t.Run("Recovery", func(t *testing.T) { testRecovery(t, srv, clock, d, st, local) })
}

// testFailClosed checks that a Deduper without a fallback fails closed while
// the server is down: Do returns the store's error without running fn.
func testFailClosed(t *testing.T, st dedupe.Store) {
	ctx := context.Background()
	closed := dedupe.New(st)
	defer closed.Close()
	ran := false
	err := closed.Do(ctx, dedupe.Key{Channel: "failover", MessageID: "closed"}, func(context.Context) error {
		ran = true
		return nil
	})
	if err == nil || errors.Is(err, dedupe.ErrDuplicate) || errors.Is(err, dedupe.ErrInFlight) {
		t.Fatalf("Do with the server down = %v, want the store's error", err)
	}
	if ran {
		t.Fatal("fn ran although the store failed")
	}
	s := closed.Stats()
	if s.StoreErrors == 0 || s.Processed != 0 || s.Fallbacks != 0 {
		t.Errorf("stats %+v", s)
	}
	t.Logf("fail closed: %v", err)
}

// testFallback checks that a Deduper with a fallback processes each message
// once on the local store while the server is down, and counts it.
func testFallback(t *testing.T, d *dedupe.Deduper) {
	ctx := context.Background()
	const keys, copies = 16, 4
	var runs [keys]atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, keys*copies)
	for i := range keys {
		k := dedupe.Key{Channel: "failover", MessageID: fmt.Sprint(i)}
		for range copies {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := d.Do(ctx, k, func(context.Context) error {
					runs[i].Add(1)
					return nil
				})
				if err != nil && !errors.Is(err, dedupe.ErrDuplicate) && !errors.Is(err, dedupe.ErrInFlight) {
					errs <- err
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Do during the outage: %v", err)
	}
	// A redelivery after processing is a duplicate, caught by the local store.
	for i := range keys {
		k := dedupe.Key{Channel: "failover", MessageID: fmt.Sprint(i)}
		if err := d.Do(ctx, k, func(context.Context) error { runs[i].Add(1); return nil }); !errors.Is(err, dedupe.ErrDuplicate) {
			t.Errorf("redelivery of %s during the outage = %v, want ErrDuplicate", k, err)
		}
		if n := runs[i].Load(); n != 1 {
			t.Errorf("%s processed %d times during the outage, want once", k, n)
		}
	}
	s := d.Stats()
	t.Logf("stats during the outage: processed %d, duplicates %d, in flight %d, store errors %d, fallbacks %d",
		s.Processed, s.Duplicates, s.InFlight, s.StoreErrors, s.Fallbacks)
	if s.Processed != 1+keys {
		t.Errorf("Processed = %d, want %d", s.Processed, 1+keys)
	}
	// Copies and redeliveries are answered by the local store's claims and
	// marks, before the primary is asked: only the first copy of each key is
	// served by the fallback alone.
	if s.Fallbacks != keys {
		t.Errorf("Fallbacks = %d, want %d (each message processed during the outage)", s.Fallbacks, keys)
	}
	if s.StoreErrors == 0 {
		t.Error("StoreErrors = 0 during an outage")
	}
	if s.Duplicates+s.InFlight != keys*copies {
		t.Errorf("Duplicates+InFlight = %d, want %d", s.Duplicates+s.InFlight, keys*copies)
	}
}

// testRecovery restarts the server and checks that the Deduper returns to it
// and writes the marks made during the outage there.
func testRecovery(t *testing.T, srv *server, clock *dedupetest.Clock, d *dedupe.Deduper, st, local dedupe.Store) {
	ctx := context.Background()
	srv.restart()
	clock.Advance(2 * time.Minute) // past the fallback retry period
	before := d.Stats().Fallbacks
	// The pool may take a moment to dial again after the restart; a Do that
	// still fails over is served locally, so each attempt takes a new key.
	var back dedupe.Key
	n := 0
	waitFor(t, "Do on Redis after the restart", 20*time.Second, func() bool {
		n++
		back = dedupe.Key{Channel: "failover", MessageID: fmt.Sprint("back-", n)}
		if err := d.Do(ctx, back, func(context.Context) error { return nil }); err != nil {
			t.Fatalf("Do after the restart: %v", err)
		}
		if ok, _ := st.Exists(ctx, back); ok {
			return true
		}
		clock.Advance(2 * time.Minute)
		return false
	})
	if ok, err := local.Exists(ctx, back); !ok || err != nil {
		t.Errorf("a message processed on Redis is not in the local store too: %v, %v", ok, err)
	}
	t.Logf("fallbacks after the restart: %d more", d.Stats().Fallbacks-before)
	// The marks made during the outage reach Redis from the backlog, so a
	// copy that reaches another gateway instance now is a duplicate there.
	waitFor(t, "the outage's marks written to Redis", 20*time.Second, func() bool {
		for i := range 16 {
			if ok, _ := st.Exists(ctx, dedupe.Key{Channel: "failover", MessageID: fmt.Sprint(i)}); !ok {
				return false
			}
		}
		return true
	})
	s := d.Stats()
	t.Logf("backlog: deferred %d, replayed %d, dropped %d", s.Deferred, s.Replayed, s.Dropped)
	if s.Dropped != 0 {
		t.Errorf("Dropped = %d", s.Dropped)
	}
	other := dedupe.New(st)
	for i := range 16 {
		k := dedupe.Key{Channel: "failover", MessageID: fmt.Sprint(i)}
		if err := other.Do(ctx, k, func(context.Context) error { return nil }); !errors.Is(err, dedupe.ErrDuplicate) {
			t.Errorf("another instance's Do(%s) after recovery = %v, want ErrDuplicate", k, err)
		}
	}
}
