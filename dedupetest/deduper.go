package dedupetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The tests of a Deduper over the store: what Do promises rests on Claim,
// Mark and Release, so every store runs them.

// testDeduperWait runs a copy that arrives while its first copy is processed,
// with [dedupe.WithWait]: it answers the owner's outcome, and runs fn only
// after an owner that failed, never beside it.
func testDeduperWait(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	d := dedupe.New(st, dedupe.WithWait(time.Minute), dedupe.WithLease(time.Hour))
	t.Cleanup(func() { _ = d.Close() })
	for i, ownerFails := range []bool{false, true} {
		k := s.key()
		var running, runs atomic.Int32
		fn := func(fail bool) func(context.Context) error {
			return func(context.Context) error {
				if running.Add(1) > 1 {
					t.Errorf("%s: two copies ran at once", k)
				}
				runs.Add(1)
				for d.Stats().Waits <= uint64(i) && runs.Load() == 1 {
					time.Sleep(time.Millisecond) // the owner holds on until the copy waits
				}
				running.Add(-1)
				if fail {
					return errors.New("delivery failed")
				}
				return nil
			}
		}
		started, done := make(chan struct{}), make(chan error, 1)
		go func() {
			done <- d.Do(context.Background(), k, func(ctx context.Context) error {
				close(started)
				return fn(ownerFails)(ctx)
			})
		}()
		<-started
		err := d.Do(context.Background(), k, fn(false))
		ownerErr := <-done
		switch {
		case ownerFails && (err != nil || ownerErr == nil || runs.Load() != 2):
			t.Fatalf("owner failed: copy = %v, owner = %v, runs = %d; want the copy to run after it", err, ownerErr, runs.Load())
		case !ownerFails && (!errors.Is(err, dedupe.ErrDuplicate) || ownerErr != nil || runs.Load() != 1):
			t.Fatalf("owner succeeded: copy = %v, owner = %v, runs = %d; want ErrDuplicate and one run", err, ownerErr, runs.Load())
		}
	}
}
