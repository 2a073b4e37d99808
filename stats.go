package dedupe

import (
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe/internal/histogram"
)

// Stats is a snapshot of a [Deduper]'s counters, shared with the Dedupers made
// by [Deduper.With].
type Stats struct {
	Backend string // the primary store's [Store.Backend]

	// Verdicts of Do: processed (fn succeeded and the key was marked),
	// refused with [ErrDuplicate] or [ErrInFlight], and failed (fn returned
	// an error or panicked, and the claim was released for the retry).
	Processed, Duplicates, InFlight, Failed uint64
	// Store faults: failed store calls, whatever the phase; calls served by
	// the fallback alone ([WithFallback]); claims a renewal found taken over;
	// and Claim calls whose error left it unknown whether the store took the
	// claim (Do asked again with its token, or released it).
	StoreErrors, Fallbacks, LeasesLost, Ambiguous uint64
	// Waits for the owner of a message in flight ([WithWait]), and how they
	// ended: the owner marked it, the caller claimed it after the owner
	// released it or its lease ran out, or the wait ran out.
	Waits, WaitsDuplicate, WaitsClaimed, WaitsTimedOut uint64
	// Marks the primary store did not take by the time Do returned (or the
	// fallback served), queued for it ([WithBacklog]); those written since;
	// and queued marks and releases dropped (the queue was full, the Deduper
	// closed, or the store refused them for good).
	Deferred, Replayed, Dropped uint64
	// Releases the store did not take (after a failure of fn, or of a Claim
	// call), queued for it; and those written since (or found unneeded: the
	// claim was gone). A release whose lease ran out first is neither.
	DeferredReleases, ReplayedReleases uint64
	// Runs whose context Do cancelled because the lease ended before it could
	// be renewed, or a renewal found the claim taken over.
	Abandoned uint64
	// Copies answered with [ErrPayloadMismatch] ([WithPayloadCheck]): their
	// payload differed from the one their message's mark keeps; they are
	// not counted in Duplicates. And copies with a payload whose mark keeps
	// no fingerprint to compare with (made before the check was on, or its
	// result dropped by the store), answered [ErrDuplicate] and counted in
	// Duplicates too.
	PayloadMismatches, PayloadUnverified uint64
	// Evicted counts the marks the primary store evicted before their TTL
	// ran out, to take new ones ([Evicter]; a full [MemoryStore] does): each
	// key is new again before its window ended. Not zero means the store is
	// too small for one TTL of messages, or a flood of distinct ids (even
	// authenticated ones) shortens every message's window. It is the
	// store's count, shared by every Deduper over it; 0 for stores that
	// never evict.
	Evicted uint64
	// Layers holds, for a [LayeredStore], the Exists and Claim calls each
	// layer answered; it is nil for other stores.
	Layers map[string]uint64
	// Latency holds store-call durations by phase: "claim", "mark",
	// "release" and "extend".
	Latency map[string]LatencyStats
}

// latencyBounds are the upper bounds of the buckets of [LatencyStats].
var latencyBounds = [...]time.Duration{
	10 * time.Microsecond, 50 * time.Microsecond, 100 * time.Microsecond,
	250 * time.Microsecond, 500 * time.Microsecond, time.Millisecond,
	2500 * time.Microsecond, 5 * time.Millisecond, 10 * time.Millisecond,
	25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 5 * time.Second,
}

// LatencyStats is a histogram of store-call durations.
type LatencyStats struct {
	Count   uint64                     // calls
	Sum     time.Duration              // their total duration
	Buckets [len(latencyBounds)]uint64 // calls within Bounds()[i], cumulative
}

// Bounds returns the upper bounds of the buckets, from 10 µs to 5 s.
func (LatencyStats) Bounds() []time.Duration { return latencyBounds[:] }

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
	releasesDeferred, releasesReplayed, abandoned      atomic.Uint64
	latency                                            [numPhases]histogram.Histogram

	payloadMismatches, payloadUnverified atomic.Uint64 // payload.go
}

// Stats returns a snapshot of d's counters; it is safe to call at any time.
func (d *Deduper) Stats() Stats {
	c := &d.shared.counters
	s := Stats{
		Backend:          d.shared.store.Backend(),
		Processed:        c.processed.Load(),
		Duplicates:       c.duplicates.Load(),
		InFlight:         c.inFlight.Load(),
		Failed:           c.failed.Load(),
		StoreErrors:      c.storeErrors.Load(),
		Fallbacks:        c.fallbacks.Load(),
		LeasesLost:       c.leasesLost.Load(),
		Ambiguous:        c.ambiguous.Load(),
		Waits:            c.waits.Load(),
		WaitsDuplicate:   c.waitsDuplicate.Load(),
		WaitsClaimed:     c.waitsClaimed.Load(),
		WaitsTimedOut:    c.waitsTimedOut.Load(),
		Deferred:         c.deferred.Load(),
		Replayed:         c.replayed.Load(),
		Dropped:          c.dropped.Load(),
		DeferredReleases: c.releasesDeferred.Load(),
		ReplayedReleases: c.releasesReplayed.Load(),
		Abandoned:        c.abandoned.Load(),
		Latency:          make(map[string]LatencyStats, numPhases),
	}
	s.PayloadMismatches, s.PayloadUnverified = c.payloadMismatches.Load(), c.payloadUnverified.Load()
	if e, ok := d.shared.store.(Evicter); ok {
		s.Evicted = e.Evicted()
	}
	if l, ok := d.shared.store.(interface{ Answered() map[string]uint64 }); ok {
		s.Layers = l.Answered()
	}
	for i := range c.latency {
		var l LatencyStats
		l.Count, l.Sum = c.latency[i].Snapshot(latencyBounds[:], l.Buckets[:])
		s.Latency[phaseNames[i]] = l
	}
	return s
}
