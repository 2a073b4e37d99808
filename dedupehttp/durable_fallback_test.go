package dedupehttp_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
)

// downStore is a primary store that is unreachable: every call fails.
type downStore struct{ dedupe.Store }

var errDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

func (downStore) Exists(context.Context, dedupe.Key) (bool, error) { return false, errDown }
func (downStore) Mark(context.Context, dedupe.Key, time.Duration) error {
	return errDown
}
func (downStore) Claim(context.Context, dedupe.Claim, time.Duration) (dedupe.Status, error) {
	return 0, errDown
}
func (downStore) Extend(context.Context, dedupe.Claim, time.Duration) error { return errDown }
func (downStore) Release(context.Context, dedupe.Claim) error               { return errDown }

// With a durable queue, Async's acceptance honours the Deduper's fallback, as
// the middleware does: during an outage of the primary every delivery is
// accepted and processed once (before, 50 of 50 were answered 503).
func TestAsyncQueueHonoursFallback(t *testing.T) {
	d := dedupe.New(downStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})},
		dedupe.WithFallback(dedupe.NewMemoryStore(dedupe.MemoryConfig{})))
	defer d.Close()
	var runs atomic.Int64
	done := make(chan struct{}, 64)
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs.Add(1) })
	a := dedupehttp.NewAsync(d, dedupehttp.FromPreset(platform.Telegram), h,
		dedupehttp.WithQueue(queue.NewMemory(queue.MemoryConfig{})),
		dedupehttp.WithDone(func(context.Context, dedupe.Key, error) { done <- struct{}{} }))
	defer func() { _ = a.Close(context.Background()) }()
	srv := serve(t, a)

	const n = 50
	accepted := 0
	for i := range n {
		if r := post(srv, update(i+1)); r.status == http.StatusAccepted {
			accepted++
		} else {
			t.Logf("delivery %d: %d %s", i+1, r.status, r.body)
		}
	}
	for range accepted {
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			require.Fail(t, "accepted deliveries not processed")
		}
	}
	require.Equal(t, n, accepted, "primary down, fallback up: accepted")
	require.Equal(t, int64(n), runs.Load(), "primary down, fallback up: handler runs")
	require.Equal(t, http.StatusOK, post(srv, update(7)).status, "a copy after processing")
}
