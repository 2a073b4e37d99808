package dedupe

import (
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a [Deduper]'s counters since it was created. The
// Dedupers made from one by [Deduper.With] share its counters.
type Stats struct {
	// Backend is the primary store's [Store.Backend].
	Backend string
	// Processed counts calls of Do whose fn succeeded and whose key was marked.
	Processed uint64
	// Duplicates counts calls of Do refused with [ErrDuplicate].
	Duplicates uint64
	// InFlight counts calls of Do refused with [ErrInFlight].
	InFlight uint64
	// Failed counts calls of Do whose fn returned an error or panicked; their
	// claim was released so the platform's retry is processed.
	Failed uint64
	// StoreErrors counts store calls that failed, whatever the phase.
	StoreErrors uint64
	// Fallbacks counts calls of Do served by the fallback store of
	// [WithFallback] while the primary store was failing.
	Fallbacks uint64
	// LeasesLost counts claims whose lease renewal found them taken over.
	LeasesLost uint64
	// Ambiguous counts Claim calls whose error left it unknown whether the
	// store took the claim; Do asked again with the same token or released it.
	Ambiguous uint64
	// Waits counts calls of Do that found the message in flight and waited for
	// its owner (see [WithWait]), and the outcomes of the waits: the owner
	// marked it (WaitsDuplicate), the caller claimed it after the owner
	// released it or its lease ran out (WaitsClaimed), or the wait ran out
	// (WaitsTimedOut).
	Waits, WaitsDuplicate, WaitsClaimed, WaitsTimedOut uint64
	// Deferred counts marks the primary store did not take (it failed, or the
	// fallback was serving alone), queued to be written when it answers again;
	// Replayed counts those written since. Dropped counts queued marks and
	// releases dropped: the queue was full (see [WithBacklog]), the Deduper
	// was closed, or the store refused them for good.
	Deferred, Replayed, Dropped uint64
	// Layers holds, for a [LayeredStore], how many Exists and Claim calls each
	// layer answered (see [LayeredStore.Answered]); it is nil for other
	// stores.
	Layers map[string]uint64
	// Latency holds the duration of store calls by phase: "claim", "mark",
	// "release" and "extend".
	Latency map[string]LatencyStats
}

// LatencyBuckets are the upper bounds of the buckets of [LatencyStats].
var LatencyBuckets = [...]time.Duration{
	10 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond,
	2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second,
}

// LatencyStats is a histogram of store-call durations.
type LatencyStats struct {
	// Count is the number of calls and Sum their total duration.
	Count uint64
	Sum   time.Duration
	// Buckets[i] counts the calls that took at most LatencyBuckets[i]; like a
	// Prometheus histogram, the counts are cumulative.
	Buckets [len(LatencyBuckets)]uint64
}

// Phases of a Deduper's store calls, as named in logs and [Stats.Latency].
const (
	phaseClaim = iota
	phaseMark
	phaseRelease
	phaseExtend
	numPhases
)

var phaseNames = [numPhases]string{"claim", "mark", "release", "extend"}

type counters struct {
	processed, duplicates, inFlight, failed            atomic.Uint64
	storeErrors, fallbacks, leasesLost, ambiguous      atomic.Uint64
	waits, waitsDuplicate, waitsClaimed, waitsTimedOut atomic.Uint64
	deferred, replayed, dropped                        atomic.Uint64
	latency                                            [numPhases]latency
}

type latency struct {
	count   atomic.Uint64
	sum     atomic.Int64
	buckets [len(LatencyBuckets)]atomic.Uint64 // not cumulative
}

func (l *latency) observe(d time.Duration) {
	l.count.Add(1)
	l.sum.Add(int64(d))
	for i, b := range LatencyBuckets {
		if d <= b {
			l.buckets[i].Add(1)
			return
		}
	}
}

func (l *latency) snapshot() LatencyStats {
	s := LatencyStats{Count: l.count.Load(), Sum: time.Duration(l.sum.Load())}
	var cum uint64
	for i := range l.buckets {
		cum += l.buckets[i].Load()
		s.Buckets[i] = cum
	}
	return s
}

// Stats returns a snapshot of d's counters. It is safe to call concurrently
// with Do.
func (d *Deduper) Stats() Stats {
	c := &d.shared.counters
	s := Stats{
		Backend:        d.shared.store.Backend(),
		Processed:      c.processed.Load(),
		Duplicates:     c.duplicates.Load(),
		InFlight:       c.inFlight.Load(),
		Failed:         c.failed.Load(),
		StoreErrors:    c.storeErrors.Load(),
		Fallbacks:      c.fallbacks.Load(),
		LeasesLost:     c.leasesLost.Load(),
		Ambiguous:      c.ambiguous.Load(),
		Waits:          c.waits.Load(),
		WaitsDuplicate: c.waitsDuplicate.Load(),
		WaitsClaimed:   c.waitsClaimed.Load(),
		WaitsTimedOut:  c.waitsTimedOut.Load(),
		Deferred:       c.deferred.Load(),
		Replayed:       c.replayed.Load(),
		Dropped:        c.dropped.Load(),
		Latency:        make(map[string]LatencyStats, numPhases),
	}
	if l, ok := d.shared.store.(*LayeredStore); ok {
		s.Layers = l.Answered()
	}
	for i := range c.latency {
		s.Latency[phaseNames[i]] = c.latency[i].snapshot()
	}
	return s
}
