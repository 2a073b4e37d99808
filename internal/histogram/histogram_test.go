package histogram

import (
	"sync"
	"testing"
	"time"
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
	if count != 4 || sum != 5*time.Second+3*time.Millisecond {
		t.Fatalf("count %d, sum %v", count, sum)
	}
	want := []uint64{2, 3, 3} // cumulative; 5 s is over the last bound
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("buckets %v, want %v", got, want)
		}
	}
}
