package dedupe_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hangingStore is a store whose server stopped answering: every claim waits
// until its context ends.
type hangingStore struct{ dedupe.Store }

func (hangingStore) Claim(ctx context.Context, _ dedupe.Claim, _ time.Duration) (dedupe.Status, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// A stalled store holds Do no longer than the store timeout, even when the
// caller's context has no deadline.
func TestWithStoreTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dedupe.New(hangingStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}, dedupe.WithStoreTimeout(2*time.Second))
		defer d.Close()
		start := time.Now()
		err := d.Do(context.Background(), key1, nop)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, 2*time.Second, time.Since(start))
	})
}

// slowFailoverStore needs leases of at least a minute to ride out a failover.
type slowFailoverStore struct{ dedupe.Store }

func (slowFailoverStore) MinLease() time.Duration { return time.Minute }

// New warns when the lease is shorter than the store's failover.
func TestNewWarnsShortLease(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	st := slowFailoverStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	dedupe.New(st, dedupe.WithLogger(logger), dedupe.WithLease(30*time.Second))
	assert.Contains(t, buf.String(), "lease is shorter than the store's failover")
	buf.Reset()
	dedupe.New(st, dedupe.WithLogger(logger), dedupe.WithLease(2*time.Minute))
	assert.Empty(t, buf.String())
}
