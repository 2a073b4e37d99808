package dedupehttp

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe/internal/histogram"

	"github.com/gatewaykit/dedupe/queue"
)

// QueueLatencyBuckets are the upper bounds of the buckets of
// [QueueLatency]: handlers queued by an [Async] are the slow ones, so they
// reach minutes.
var QueueLatencyBuckets = [...]time.Duration{
	10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second,
	2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
	30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute,
}

// QueueLatency is a histogram of the durations of an [Async]'s handler runs.
type QueueLatency struct {
	// Count is the number of runs and Sum their total duration.
	Count uint64
	Sum   time.Duration
	// Buckets[i] counts the runs that took at most QueueLatencyBuckets[i];
	// like a Prometheus histogram, the counts are cumulative.
	Buckets [len(QueueLatencyBuckets)]uint64
}

// QueueStats counts what became of the messages an [Async] accepted, in
// both tiers, since it was created.
type QueueStats struct {
	// Success counts messages whose handler succeeded (they were marked).
	Success uint64
	// Retried counts deliveries put back in the [queue.Queue] to be taken again:
	// the handler failed with attempts left ([WithMaxAttempts]), the key was
	// in flight elsewhere (a dead worker's lease had not run out), the store
	// failed, or [Async.Close] gave up waiting for the handler.
	Retried uint64
	// Failed counts messages that failed for good: the handler failed on
	// the last attempt or in the memory tier, the message was taken once
	// more than [WithMaxAttempts] allows (its worker died on it), or it was
	// abandoned in the memory tier at Close. Those of the queue are its dead
	// letters ([queue.Queue.Failed]).
	Failed uint64
	// Duplicate counts queued messages settled without running the handler
	// because their key was marked already: processed under another queue
	// id, or by a worker that died before it settled the message.
	Duplicate uint64
	// Full counts requests refused with 503 and Retry-After because the
	// queue they would have joined was full: the memory tier at
	// [WithWorkers] + [WithQueueSize], or a [queue.Queue] at its depth bound.
	Full uint64
	// Latency is the duration of the handler runs.
	Latency QueueLatency
}

type queueCounters struct {
	success, retried, failed, duplicate, full atomic.Uint64
	latency                                   histogram.Histogram
}

// QueueStats returns a snapshot of a's queue counters. It is safe to call
// concurrently with ServeHTTP.
func (a *Async) QueueStats() QueueStats {
	s := QueueStats{
		Success:   a.stats.success.Load(),
		Retried:   a.stats.retried.Load(),
		Failed:    a.stats.failed.Load(),
		Duplicate: a.stats.duplicate.Load(),
		Full:      a.stats.full.Load(),
	}
	s.Latency.Count, s.Latency.Sum = a.stats.latency.Snapshot(QueueLatencyBuckets[:], s.Latency.Buckets[:])
	return s
}

// Depth returns how many accepted messages are waiting or being processed:
// those of the memory tier in this process, plus the live messages of the
// [queue.Queue] of [WithQueue] or [WithOverflow], whichever process queued them.
func (a *Async) Depth(ctx context.Context) (int, error) {
	n := len(a.slots)
	if a.c.queue == nil {
		return n, nil
	}
	c, err := a.c.queue.Count(ctx)
	return n + c.Live, err
}

// Queue returns the [queue.Queue] of [WithQueue] or [WithOverflow], or nil:
// to list its dead letters ([queue.Queue.Failed]) and requeue them.
func (a *Async) Queue() queue.Queue { return a.c.queue }

// Name returns the name of the preset given by [WithVerify], such as
// "telegram", or "".
func (a *Async) Name() string {
	if a.c.preset == nil {
		return ""
	}
	return a.c.preset.Name
}
