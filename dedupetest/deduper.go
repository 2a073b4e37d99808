package dedupetest

import (
	"context"
	"errors"
	"sync"
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

// testDeduperEach runs overlapping batches through two Dedupers over the
// store at once, as two gateways handed the same redelivered batch:
// [dedupe.Deduper.DoEach] runs each message once across both, reports the
// others as duplicates or in flight, keeps results, and a failed message runs
// again in the next batch.
func testDeduperEach(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	keys := make([]dedupe.Key, 48)
	for i := range keys {
		keys[i] = s.key()
	}
	runs := make([]atomic.Int32, len(keys))
	fn := func(_ context.Context, i int) ([]byte, error) {
		runs[i%len(keys)].Add(1)
		if i%len(keys)%7 == 0 {
			return nil, errors.New("delivery failed")
		}
		return []byte("r" + keys[i%len(keys)].MessageID), nil
	}
	batch := append(append([]dedupe.Key{}, keys...), keys[:8]...) // with repeats
	idx := func(i int) int { return i % len(keys) }
	var wg sync.WaitGroup
	for g := range 2 {
		d := dedupe.New(st, dedupe.WithLease(time.Hour), dedupe.WithWait(time.Minute), dedupe.WithConcurrency(1+3*g))
		wg.Go(func() {
			res, errs := d.DoEachResult(context.Background(), batch, func(ctx context.Context, i int) ([]byte, error) { return fn(ctx, idx(i)) })
			for i, err := range errs {
				ok := err == nil || errors.Is(err, dedupe.ErrDuplicate) || (idx(i)%7 == 0 && err.Error() == "delivery failed")
				if !ok {
					t.Errorf("gateway %d: DoEach: %s: %v", g, batch[i], err)
				}
				if err == nil || errors.Is(err, dedupe.ErrDuplicate) {
					if want := "r" + batch[i].MessageID; string(res[i]) != want {
						t.Errorf("gateway %d: %s: result %q, want %q", g, batch[i], res[i], want)
					}
				}
			}
		})
	}
	wg.Wait()
	for i := range keys {
		if n := runs[i].Load(); (i%7 != 0 && n != 1) || (i%7 == 0 && n != 2) {
			t.Errorf("%s ran %d times; want once, or once per gateway for a failing one", keys[i], n)
		}
	}
	d := dedupe.New(st)
	errs := d.DoEach(context.Background(), keys, func(_ context.Context, i int) error { runs[i].Add(1); return nil })
	for i, err := range errs {
		if want := i%7 == 0; (err == nil) != want || (!want && !errors.Is(err, dedupe.ErrDuplicate)) {
			t.Errorf("redelivered %s: %v; want it run only if it had failed", keys[i], err)
		}
	}
}
