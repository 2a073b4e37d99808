package deduperedis

import "time"

// ClaimScriptSource is the claim script, for the benchmarks' raw client.
const ClaimScriptSource = claimLua

// Queued returns how many calls of s wait for a round trip.
func Queued(s *Store) int {
	return s.b.Queued()
}

// RoundsInFlight is how many pipelines a store has in flight at most.
const RoundsInFlight = roundsInFlight

// Prefix returns the key prefix of s.
func Prefix(s *Store) string { return s.prefix }

// UseScripts has the compact layout of s run its scripts, as on a server
// older than Redis 7.0.
func UseScripts(s *Store) { s.scripted.Store(true) }

// SetClock sets the gateway's clock of s, which the compact layout reads its
// marks' expiries by (nil: time.Now). Call it before the store's first call.
func SetClock(s *Store, now func() time.Time) { s.now = now }

// LayoutKey is the suffix of a prefix's layout record.
const LayoutKey = layoutKey

// SetLayoutRecheck sets how often s checks its layout record again.
func SetLayoutRecheck(s *Store, d time.Duration) { s.layout.every = d }
