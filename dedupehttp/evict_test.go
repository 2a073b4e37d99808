package dedupehttp_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFloodEvictionIsCounted: on the default memory store (10,000 marks), a
// flood of 12,000 authenticated deliveries with distinct ids (one sender who
// holds the secret, or a platform replaying a backlog) evicts another
// update's mark inside its TTL, and that update's redelivery runs the
// handler again. The endpoint cannot tell the flood from traffic, but the
// shortened window is not silent: Stats.Evicted counts it and the store
// warns once.
func TestFloodEvictionIsCounted(t *testing.T) {
	var logs bytes.Buffer
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	d := dedupe.New(store)
	t.Cleanup(func() { _ = d.Close() })
	var runs atomic.Int64
	h := dedupehttp.New(d, platform.Telegram.WithSecret("s3cret"),
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runs.Add(1) }),
		dedupehttp.WithLogger(slog.New(slog.DiscardHandler)))
	secret := http.Header{"X-Telegram-Bot-Api-Secret-Token": {"s3cret"}}

	require.Equal(t, http.StatusOK, deliver(h, update(1), secret).Code)
	for id := 1000; id < 13000; id++ {
		require.Equal(t, http.StatusOK, deliver(h, update(id), secret).Code)
	}
	require.Equal(t, http.StatusOK, deliver(h, update(1), secret).Code)
	assert.EqualValues(t, 1+12000+1, runs.Load(), "update 1's redelivery ran again: its mark was evicted inside its TTL")

	assert.GreaterOrEqual(t, d.Stats().Evicted, uint64(2000))
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
}
