package dedupe_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// The duration options follow one rule (issue 34, item 6): zero keeps the
// setting, as a TTL or a lease of zero means the default everywhere; a
// negative duration turns off what can be turned off. A wait, TTL, renewal or
// store timeout of 0 read from a config therefore never undoes a drop-in's.
func TestDurationOptionsZeroKeeps(t *testing.T) {
	t.Run("wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := dedupe.New(nil, dedupe.WithWait(10*time.Second)).With(dedupe.WithWait(0))
			var running atomic.Int32
			started, done := owner(d, 2*time.Second, nil, &running)
			<-started
			err := d.Do(context.Background(), key1, func(context.Context) error { assert.Fail(t, "the copy ran"); return nil })
			require.ErrorIs(t, err, dedupe.ErrDuplicate, "WithWait(0) kept the 10 s wait: the copy waited for the owner")
			require.NoError(t, <-done)
		})
	})
	t.Run("wait off", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := dedupe.New(nil, dedupe.WithWait(10*time.Second)).With(dedupe.WithWait(-1))
			var running atomic.Int32
			started, done := owner(d, 2*time.Second, nil, &running)
			<-started
			begin := time.Now()
			err := d.Do(context.Background(), key1, func(context.Context) error { assert.Fail(t, "the copy ran"); return nil })
			require.ErrorIs(t, err, dedupe.ErrInFlight, "a negative wait turns waiting off")
			assert.Zero(t, time.Since(begin))
			require.NoError(t, <-done)
		})
	})
	t.Run("ttl", func(t *testing.T) {
		clock := dedupetest.NewClock(time.Unix(1_700_000_000, 0))
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: clock.Now})
		d := dedupe.New(st, dedupe.WithTTL(time.Minute)).With(dedupe.WithTTL(0))
		require.NoError(t, d.Do(context.Background(), key1, nop))
		clock.Advance(2 * time.Minute)
		ok, err := st.Exists(context.Background(), key1)
		require.NoError(t, err)
		assert.False(t, ok, "WithTTL(0) kept the minute, not the store's 24 h")
	})
	t.Run("renewal", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			d := dedupe.New(nil, dedupe.WithLease(3*time.Second), dedupe.WithRenewal(0))
			err := d.Do(context.Background(), key1, func(ctx context.Context) error {
				time.Sleep(10 * time.Second) // three leases: renewed all along
				return context.Cause(ctx)
			})
			require.NoError(t, err, "WithRenewal(0) kept the default renewal")
		})
	})
	t.Run("store timeout", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			st := hangingStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
			d := dedupe.New(st, dedupe.WithStoreTimeout(2*time.Second)).With(dedupe.WithStoreTimeout(0))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			err := d.Do(ctx, key1, nop)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Equal(t, 2*time.Second, time.Since(start), "WithStoreTimeout(0) kept the 2 s bound")
		})
	})
}
