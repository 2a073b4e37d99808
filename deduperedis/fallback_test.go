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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.NoError(t, d.Do(ctx, up, func(context.Context) error { return nil }), "Do with the server up")
	ok, err := st.Exists(ctx, up)
	require.NoError(t, err, "mark not in Redis")
	require.True(t, ok, "mark not in Redis")

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
	require.Error(t, err, "Do with the server down, want the store's error")
	require.NotErrorIs(t, err, dedupe.ErrDuplicate, "Do with the server down, want the store's error")
	require.NotErrorIs(t, err, dedupe.ErrInFlight, "Do with the server down, want the store's error")
	require.False(t, ran, "fn ran although the store failed")
	s := closed.Stats()
	assert.NotZero(t, s.StoreErrors, "stats %+v", s)
	assert.Zero(t, s.Processed, "stats %+v", s)
	assert.Zero(t, s.Fallbacks, "stats %+v", s)
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
		assert.NoError(t, err, "Do during the outage")
	}
	// A redelivery after processing is a duplicate, caught by the local store.
	for i := range keys {
		k := dedupe.Key{Channel: "failover", MessageID: fmt.Sprint(i)}
		err := d.Do(ctx, k, func(context.Context) error { runs[i].Add(1); return nil })
		assert.ErrorIs(t, err, dedupe.ErrDuplicate, "redelivery of %s during the outage", k)
		assert.Equal(t, int32(1), runs[i].Load(), "times %s was processed during the outage", k)
	}
	s := d.Stats()
	t.Logf("stats during the outage: processed %d, duplicates %d, in flight %d, store errors %d, fallbacks %d",
		s.Processed, s.Duplicates, s.InFlight, s.StoreErrors, s.Fallbacks)
	assert.Equal(t, uint64(1+keys), s.Processed, "Processed")
	// Copies and redeliveries are answered by the local store's claims and
	// marks, before the primary is asked: only the first copy of each key is
	// served by the fallback alone.
	assert.Equal(t, uint64(keys), s.Fallbacks, "Fallbacks (each message processed during the outage)")
	assert.NotZero(t, s.StoreErrors, "StoreErrors = 0 during an outage")
	assert.Equal(t, uint64(keys*copies), s.Duplicates+s.InFlight, "Duplicates+InFlight")
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
		require.NoError(t, d.Do(ctx, back, func(context.Context) error { return nil }), "Do after the restart")
		if ok, _ := st.Exists(ctx, back); ok {
			return true
		}
		clock.Advance(2 * time.Minute)
		return false
	})
	ok, err := local.Exists(ctx, back)
	assert.NoError(t, err, "a message processed on Redis is not in the local store too")
	assert.True(t, ok, "a message processed on Redis is not in the local store too")
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
	assert.Zero(t, s.Dropped, "Dropped")
	other := dedupe.New(st)
	for i := range 16 {
		k := dedupe.Key{Channel: "failover", MessageID: fmt.Sprint(i)}
		err := other.Do(ctx, k, func(context.Context) error { return nil })
		assert.ErrorIs(t, err, dedupe.ErrDuplicate, "another instance's Do(%s) after recovery", k)
	}
}
