package dedupehttp_test

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
)

// TestFailedDeliveryRecord serves updates whose handler fails (a 500, a
// 429, a panic before any status) and checks that the middleware logs each at warn level with its key,
// the status the handler answered and the error: what an operator reads to
// learn why the platform will redeliver. Before, a failed delivery left no
// record of the middleware's (0 of 3), and the Deduper's decision record
// says only "failed".
func TestFailedDeliveryRecord(t *testing.T) {
	var logs logBuffer
	statuses := map[string]int{"1": http.StatusInternalServerError, "2": http.StatusTooManyRequests}
	h := dedupehttp.New(dedupe.New(nil), platform.Telegram.WithSecret("s"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := dedupehttp.KeyFrom(r.Context())
		if k.MessageID == "3" {
			panic("before any status")
		}
		http.Error(w, "not now", statuses[k.MessageID])
	}), dedupehttp.WithLogger(logs.logger()))
	signed := http.Header{"X-Telegram-Bot-Api-Secret-Token": {"s"}}
	for _, id := range []int{1, 2} {
		assert.Equal(t, statuses[strconv.Itoa(id)], deliver(h, update(id), signed).Code)
	}
	assert.PanicsWithValue(t, "before any status", func() { deliver(h, update(3), signed) }, "the panic goes on")

	var failed []map[string]any
	for _, rec := range logs.records(t) {
		if rec["status"] != nil {
			failed = append(failed, rec)
		}
	}
	require.Len(t, failed, 3, "one record per failed delivery")
	for i, want := range []struct {
		key    string
		status float64
		error  string
	}{
		{"telegram:1", 500, "handler failed: status 500"},
		{"telegram:2", 429, "handler failed: status 429"},
		{"telegram:3", 0, "handler failed: panicked"},
	} {
		rec := failed[i]
		assert.Equal(t, "WARN", rec["level"])
		assert.Equal(t, want.key, rec["key"])
		assert.Equal(t, want.status, rec["status"])
		assert.Contains(t, rec["error"], want.error)
	}
}
