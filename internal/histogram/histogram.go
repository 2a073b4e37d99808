// Package histogram is the one latency histogram of the module: the Deduper's
// store calls and the durable queue's handler runs both count into it.
package histogram

import (
	"sync/atomic"
	"time"
)

// MaxBuckets is the most buckets a Histogram holds.
const MaxBuckets = 16

// Histogram counts durations into buckets with upper bounds the caller keeps
// (at most MaxBuckets, increasing) and passes to each method. Its zero value
// is empty and ready; it is safe for concurrent use.
type Histogram struct {
	count   atomic.Uint64
	sum     atomic.Int64
	buckets [MaxBuckets]atomic.Uint64 // not cumulative
}

// Observe counts d in the first bucket whose bound is at least d; a
// duration over the last bound is counted in the total only.
func (h *Histogram) Observe(bounds []time.Duration, d time.Duration) {
	h.count.Add(1)
	h.sum.Add(int64(d))
	for i, b := range bounds[:min(len(bounds), MaxBuckets)] {
		if d <= b {
			h.buckets[i].Add(1)
			return
		}
	}
}

// Snapshot writes the cumulative count of each bucket of bounds into dst (as
// a Prometheus histogram counts them) and returns the number of durations
// observed and their sum.
func (h *Histogram) Snapshot(bounds []time.Duration, dst []uint64) (count uint64, sum time.Duration) {
	var cum uint64
	for i := range min(len(bounds), len(dst), MaxBuckets) {
		cum += h.buckets[i].Load()
		dst[i] = cum
	}
	return h.count.Load(), time.Duration(h.sum.Load())
}
