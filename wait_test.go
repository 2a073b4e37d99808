package dedupe_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// owner runs Do for key1 on d with a function that takes hold seconds and
// then returns err, and reports when it has started.
func owner(d *dedupe.Deduper, hold time.Duration, err error, running *atomic.Int32) (started <-chan struct{}, done <-chan error) {
	s, dn := make(chan struct{}), make(chan error, 1)
	go func() {
		dn <- d.Do(context.Background(), key1, func(context.Context) error {
			running.Add(1)
			close(s)
			time.Sleep(hold)
			running.Add(-1)
			return err
		})
	}()
	return s, dn
}

func TestWaitOwnerSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dedupe.New(nil, dedupe.WithWait(10*time.Second))
		var running atomic.Int32
		started, done := owner(d, 2*time.Second, nil, &running)
		<-started
		begin := time.Now()
		err := d.Do(context.Background(), key1, func(context.Context) error { assert.Fail(t, "the copy ran"); return nil })
		require.ErrorIs(t, err, dedupe.ErrDuplicate, "the owner marked it")
		assert.GreaterOrEqual(t, time.Since(begin), 2*time.Second, "answered after the owner finished")
		assert.Less(t, time.Since(begin), 3*time.Second, "and soon after")
		require.NoError(t, <-done)
		s := d.Stats()
		assert.Equal(t, uint64(1), s.Waits)
		assert.Equal(t, uint64(1), s.WaitsDuplicate)
	})
}

func TestWaitOwnerFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dedupe.New(nil, dedupe.WithWait(10*time.Second))
		var running atomic.Int32
		boom := errors.New("AI core unavailable")
		started, done := owner(d, 2*time.Second, boom, &running)
		<-started
		ran := false
		err := d.Do(context.Background(), key1, func(context.Context) error {
			ran = true
			assert.Zero(t, running.Load(), "after the owner, never beside it")
			return nil
		})
		require.NoError(t, err)
		assert.True(t, ran, "the copy is processed when the owner failed")
		require.ErrorIs(t, <-done, boom)
		assert.Equal(t, uint64(1), d.Stats().WaitsClaimed)
	})
}

func TestWaitTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dedupe.New(nil, dedupe.WithWait(time.Second))
		var running atomic.Int32
		started, done := owner(d, 5*time.Second, nil, &running)
		<-started
		begin := time.Now()
		err := d.Do(context.Background(), key1, func(context.Context) error { assert.Fail(t, "the copy ran"); return nil })
		require.ErrorIs(t, err, dedupe.ErrInFlight)
		assert.Equal(t, time.Second, time.Since(begin), "after max")

		// The caller's own deadline ends a wait too.
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		begin = time.Now()
		require.ErrorIs(t, d.With(dedupe.WithWait(time.Hour)).Do(ctx, key1, func(context.Context) error { return nil }), dedupe.ErrInFlight)
		assert.Equal(t, 300*time.Millisecond, time.Since(begin))
		require.NoError(t, <-done)
		s := d.Stats()
		assert.Equal(t, uint64(2), s.Waits)
		assert.Equal(t, uint64(2), s.WaitsTimedOut)
		assert.Equal(t, uint64(2), s.InFlight)
	})
}

// An owner that died holds its claim until the lease runs out; a waiter then
// takes over.
func TestWaitLeaseRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		_, status, err := claimNew(context.Background(), st, key1, 2*time.Second) // a gateway that died
		require.NoError(t, err)
		require.Equal(t, dedupe.Claimed, status)
		d := dedupe.New(st, dedupe.WithWait(time.Minute))
		ran := false
		begin := time.Now()
		require.NoError(t, d.Do(context.Background(), key1, func(context.Context) error { ran = true; return nil }))
		assert.True(t, ran)
		assert.GreaterOrEqual(t, time.Since(begin), 2*time.Second)
	})
}

// Many copies waiting on one owner that fails: exactly one of them runs, and
// never beside another.
func TestWaitManyCopies(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dedupe.New(nil, dedupe.WithWait(time.Minute))
		var running, runs, overlap atomic.Int32
		started, done := owner(d, time.Second, errors.New("fail"), &running)
		<-started
		var wg sync.WaitGroup
		errs := make([]error, 20)
		for i := range errs {
			wg.Go(func() {
				errs[i] = d.Do(context.Background(), key1, func(context.Context) error {
					if running.Add(1) > 1 {
						overlap.Add(1)
					}
					runs.Add(1)
					time.Sleep(500 * time.Millisecond)
					running.Add(-1)
					return nil
				})
			})
		}
		wg.Wait()
		<-done
		assert.Equal(t, int32(1), runs.Load())
		assert.Zero(t, overlap.Load())
		dups := 0
		for _, err := range errs {
			if errors.Is(err, dedupe.ErrDuplicate) {
				dups++
			} else {
				require.NoError(t, err)
			}
		}
		assert.Equal(t, len(errs)-1, dups)
	})
}
