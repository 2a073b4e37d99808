package histogram

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestHistogram(t *testing.T) {
	bounds := []time.Duration{time.Millisecond, 10 * time.Millisecond, time.Second}
	var h Histogram
	var wg sync.WaitGroup
	for _, d := range []time.Duration{0, time.Millisecond, 2 * time.Millisecond, 5 * time.Second} {
		wg.Go(func() { h.Observe(bounds, d) })
	}
	wg.Wait()
	got := make([]uint64, len(bounds))
	count, sum := h.Snapshot(bounds, got)
	require.Equal(t, uint64(4), count, "count")
	require.Equal(t, 5*time.Second+3*time.Millisecond, sum, "sum")
	want := []uint64{2, 3, 3} // cumulative; 5 s is over the last bound
	require.Equal(t, want, got, "buckets")
}
