package dedupe_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Instance A loses its store while it runs a message; its lease cannot be
// renewed, so Do cancels the handler's context at the lease's end, with a
// cause that says so. Instance B, which reaches the store, claims the
// message once the lease ran out: the two runs never overlap.
func TestDoLeaseEndCancelsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		cutOff := &flakyStore{Store: shared}
		const lease = 3 * time.Second
		a := dedupe.New(cutOff, dedupe.WithLease(lease))
		defer a.Close()
		b := dedupe.New(shared, dedupe.WithLease(lease))

		var running, overlaps atomic.Int32
		handler := func(ctx context.Context) error {
			if running.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer running.Add(-1)
			select {
			case <-ctx.Done(): // a handler that honours its context
				return ctx.Err()
			case <-time.After(30 * time.Second):
				return nil
			}
		}
		start := time.Now()
		var cancelledAfter time.Duration
		var cause error
		aDone := make(chan error, 1)
		go func() {
			aDone <- a.Do(context.Background(), key1, func(ctx context.Context) error {
				cutOff.down.Store(true) // instance A is cut off from the store
				err := handler(ctx)
				cancelledAfter, cause = time.Since(start), context.Cause(ctx)
				return err
			})
		}()
		time.Sleep(lease + time.Millisecond)
		require.NoError(t, b.Do(context.Background(), key1, handler), "B claims once A's lease ran out")

		err := <-aDone
		require.ErrorIs(t, err, dedupe.ErrNotOwner, "A's run is reported as abandoned")
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, cause, dedupe.ErrNotOwner)
		assert.Equal(t, lease-lease/20, cancelledAfter, "A's handler context ended with its lease, a twentieth early")
		assert.Zero(t, overlaps.Load(), "A and B ran the message at the same time")
		assert.Equal(t, uint64(1), a.Stats().Abandoned)
	})
}

// A renewal that finds the claim taken over cancels the handler at once.
func TestDoClaimTakenOverCancelsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(st, dedupe.WithLease(3*time.Second))
		start := time.Now()
		err := d.Do(context.Background(), key1, func(ctx context.Context) error {
			require.NoError(t, st.Mark(ctx, key1, time.Hour)) // someone else marks it
			<-ctx.Done()
			assert.Equal(t, time.Second, time.Since(start), "cancelled at the first renewal")
			return ctx.Err()
		})
		require.ErrorIs(t, err, dedupe.ErrNotOwner)
		assert.Equal(t, uint64(1), d.Stats().Abandoned)
	})
}

// Renewals that fail for a moment and then succeed keep the handler running.
func TestDoLeaseSurvivesShortOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
		d := dedupe.New(st, dedupe.WithLease(3*time.Second))
		defer d.Close()
		require.NoError(t, d.Do(context.Background(), key1, func(ctx context.Context) error {
			st.down.Store(true)
			time.Sleep(1500 * time.Millisecond) // one renewal fails
			st.down.Store(false)
			time.Sleep(5 * time.Second) // later ones succeed
			return ctx.Err()
		}))
		assert.Zero(t, d.Stats().Abandoned)
	})
}

// Without renewal a handler's context ends with the lease.
func TestDoNoRenewalEndsWithLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dedupe.New(nil, dedupe.WithLease(2*time.Second), dedupe.WithRenewal(-1))
		start := time.Now()
		err := d.Do(context.Background(), key1, func(ctx context.Context) error {
			<-ctx.Done()
			assert.Equal(t, 1900*time.Millisecond, time.Since(start), "the lease, a twentieth early")
			return context.Cause(ctx)
		})
		require.ErrorIs(t, err, dedupe.ErrNotOwner)
	})
}

// A handler's context is cancelled once Do returns, so nothing derived from
// it outlives the run.
func TestDoHandlerContextEndsWithDo(t *testing.T) {
	d := dedupe.New(nil)
	var kept context.Context
	require.NoError(t, d.Do(context.Background(), key1, func(ctx context.Context) error { kept = ctx; return nil }))
	require.Error(t, kept.Err())
	assert.False(t, errors.Is(context.Cause(kept), dedupe.ErrNotOwner))
}

// With the defaults (no WithLease, no WithRenewal), the message of a process
// that died holding its claim runs again within a minute, while a handler
// that runs for ten minutes keeps its claim: the Deduper's lease is short
// and renewed. Before, the lease was 5 minutes: the dead process's message
// waited that long.
func TestDoDefaultLeaseRecoversInSeconds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(st)
		defer d.Close()
		assert.LessOrEqual(t, d.Lease(), 30*time.Second, "the default lease")

		// A process took key1's claim as Do does, and died: nothing renews
		// or releases it. Another polls it every second, as a queue would.
		dead := dedupe.NewClaim(key1)
		status, err := st.Claim(context.Background(), dead, d.Lease())
		require.NoError(t, err)
		require.Equal(t, dedupe.Claimed, status)
		start := time.Now()
		for {
			err := d.Do(context.Background(), key1, func(context.Context) error { return nil })
			if err == nil {
				break
			}
			require.ErrorIs(t, err, dedupe.ErrInFlight)
			require.Less(t, time.Since(start), time.Minute, "the dead process's message is still held")
			time.Sleep(time.Second)
		}
		assert.LessOrEqual(t, time.Since(start), d.Lease(), "ran again once the lease ran out")

		// A handler running ten minutes keeps its claim all along.
		longKey := dedupe.Key{Channel: "telegram", MessageID: "long"}
		other := dedupe.New(st)
		var runs atomic.Int32
		handler := func(ctx context.Context) error {
			runs.Add(1)
			for range 10 {
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(time.Minute):
				}
				require.ErrorIs(t, other.Do(context.Background(), longKey, func(context.Context) error {
					runs.Add(1)
					return nil
				}), dedupe.ErrInFlight, "a copy while the long handler runs")
			}
			return nil
		}
		require.NoError(t, d.Do(context.Background(), longKey, handler))
		assert.Equal(t, int32(1), runs.Load())
		assert.Zero(t, d.Stats().Abandoned)
	})
}
