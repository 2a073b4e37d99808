package dedupeprom_test

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupeprom"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

// TestCollectorEvictions: marks a full memory store evicts before their TTL
// ran out (a flood of distinct ids shortening every message's window) are
// exported as dedupe_evicted_marks_total, the count of Stats.Evicted.
func TestCollectorEvictions(t *testing.T) {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 200, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	d := dedupe.New(store)
	t.Cleanup(func() { _ = d.Close() })
	for i := range 1000 {
		require.NoError(t, d.Do(t.Context(), key(fmt.Sprint("flood-", i)), ok))
	}
	evicted := d.Stats().Evicted
	require.GreaterOrEqual(t, evicted, uint64(800))

	want := fmt.Sprintf(`
# HELP dedupe_evicted_marks_total Marks the store evicted before their TTL ran out, to take new ones: each key was new again before its window ended. A bounded store (memory) that is too small for one TTL of messages, or a flood of distinct ids, evicts them.
# TYPE dedupe_evicted_marks_total counter
dedupe_evicted_marks_total{backend="memory"} %d
`, evicted)
	require.NoError(t, testutil.CollectAndCompare(dedupeprom.NewCollector(d), strings.NewReader(want), "dedupe_evicted_marks_total"))
}
