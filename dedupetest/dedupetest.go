// Package dedupetest is the conformance suite for implementations of
// [dedupe.Store]. Every store in this module runs it; a third-party store should
// too:
//
//	func TestConformance(t *testing.T) {
//		dedupetest.Run(t, dedupetest.Config{
//			New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
//				return mystore.New(mystore.Config{TTL: o.TTL, Lease: o.Lease, Now: o.Now})
//			},
//		})
//	}
//
// ExampleRun, in example_test.go, is this test for the memory store, compiled
// by go test. Keys are unique to each run, so stores that share a server need
// not be empty.
//
// # Capabilities
//
// Run also tests what a store can do beyond [dedupe.Store]: for each optional
// interface declared beside it ([dedupe.Lister], [dedupe.BulkMarker],
// [dedupe.BatchStore], [dedupe.Counter], [dedupe.Sizer], [dedupe.MinLeaser],
// [dedupe.Evicter], [dedupe.Forgetter]) that a store of New implements, Run
// adds a group of subtests named after the interface, and logs which groups
// it added. A store made of others that has Forget but fails it with
// [errors.ErrUnsupported] (a part of it cannot forget) skips its group. The groups that count or
// walk the whole store ask New for a store of its own ([Options].Isolated).
// A store that implements [dedupe.Lister] but refuses to walk its marks in
// the configuration under test (its ListMarks fails with an error wrapping
// [errors.ErrUnsupported], as the compact layout of package deduperedis
// does) has its Lister group skipped, with the reason logged.
//
// [dedupe.TxStore] is generic in the database's transaction type, which Run
// cannot name: a store that implements it runs [RunTx] as well, with a
// [TxConfig] that writes and counts effects in that database.
//
// # Payloads
//
// Run's group DeduperPayload runs [dedupe.WithPayloadCheck] over the store:
// the fingerprint of a payload is kept in the slot of the result kept with
// a mark ([dedupe.Store.MarkResult]), which every store has, so every store
// runs it. Two Dedupers share the store: copies one of them gets of what the
// other processed are duplicates if their payload is the same (JSON
// reordered) and refused with [dedupe.ErrPayloadMismatch] if it differs,
// through Do, DoResult and DoEachResult, with results up to the room the
// fingerprint leaves.
//
// # Replies
//
// Package reply keeps its records in any store: Run's group Replies sends
// replies through a [reply.Sender] on the store to a test platform (first
// send, a resend after a recorded send, an unknown outcome under each
// policy, a refused send, concurrent sends of one reply, slots and Flush,
// the records' TTL, unreadable records, a closed store). RunTx adds the
// groups MarkResultTx and IntendTx for a store that is also a
// [reply.TxStore] of its transaction type.
package dedupetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Options are the settings Run asks of each store it creates.
type Options struct {
	// TTL and Lease are the store's defaults for ttl <= 0 and lease <= 0.
	// Zero asks for the store's built-in defaults (24 h and 5 min).
	TTL, Lease time.Duration
	// Now is the clock the store must use. It is nil when [Config.RealTime] is set.
	Now func() time.Time
	// MaxSize, when positive, is a bound on marks the store may apply (such as
	// [dedupe.MemoryConfig].MaxSize); stores without one ignore it. Run sets it
	// for the test that floods a store with marks while a claim is held.
	MaxSize int
	// Isolated asks for a store in a namespace of its own: its own prefix,
	// table or file, shared with no other store of the run, and empty. The
	// capability groups that count or walk the whole store ask for it. A store
	// whose every New is separate (a memory store, a new file) has nothing to
	// do.
	Isolated bool
}

// Config describes the store under test.
type Config struct {
	// New returns a new store configured by o. Run closes it (Close is part of
	// the contract being tested, so New should not register its own Close).
	New func(t *testing.T, o Options) dedupe.Store

	// RealTime reports that the store decides expiry by a clock that cannot be
	// injected, such as a database server's. Run then uses TTLs and leases of a
	// few hundred milliseconds and waits them out, and cannot check the 24 h
	// default TTL and 5 min default lease (test those in the store's own tests).
	RealTime bool

	// Unit scales the durations of a RealTime run. Default 60 ms; raise it for a
	// slow server. Run raises it further on a loaded machine: to 8 times the
	// slowest of 10 probes, each a store call and a 1 ms sleep, so that the
	// margins of the timing checks outlast the delays the machine adds.
	Unit time.Duration

	// MarkForever, if set, writes a mark of key on st that never expires, by
	// means outside [dedupe.Store], as another program may have written it (a
	// SQLite row whose expires_at is NULL, a Redis key without a TTL). The
	// capability groups then check that such a mark is listed with the zero
	// time, counted live but left out of the oldest and newest expiry, and
	// kept forever by MarkUntil. Leave it nil for a store that has no such
	// marks: those checks are skipped.
	MarkForever func(t *testing.T, st dedupe.Store, key dedupe.Key)
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, cfg Config) {
	if cfg.New == nil {
		t.Fatal("dedupetest: Config.New is nil")
	}
	if cfg.Unit <= 0 {
		cfg.Unit = 60 * time.Millisecond
	}
	if cfg.RealTime {
		cfg.Unit = max(cfg.Unit, 8*probeDelay(t, cfg))
		t.Logf("dedupetest: real-time unit %v", cfg.Unit)
	}
	groups := []group{
		{"MarkExists", testMarkExists},
		{"TTLExpiry", testTTLExpiry},
		{"Remark", testRemark},
		{"DefaultTTL", testDefaultTTL},
		{"DefaultLease", testDefaultLease},
		{"ClaimStatuses", testClaimStatuses},
		{"ClaimExclusive", testClaimExclusive},
		{"LeaseExpiry", testLeaseExpiry},
		{"ReleaseStale", testReleaseStale},
		{"MarkClearsClaim", testMarkClearsClaim},
		{"Extend", testExtend},
		{"ClaimIdempotent", testClaimIdempotent},
		{"InvalidTokens", testInvalidTokens},
		{"ClaimsNotEvicted", testClaimsNotEvicted},
		{"NothingStranded", testNothingStranded},
		{"DeduperWait", testDeduperWait},
		{"DeduperEach", testDeduperEach},
		{"ResultRoundTrip", testResultRoundTrip},
		{"ResultTooLarge", testResultTooLarge},
		{"ResultLifetime", testResultLifetime},
		{"ResultClearsClaim", testResultClearsClaim},
		{"ResultInputs", testResultInputs},
		{"DeduperResult", testDeduperResult},
		{"DeduperPayload", testDeduperPayload},
		{"KeyForms", testKeyForms},
		{"InvalidKeys", testInvalidKeys},
		{"Closed", testClosed},
		{"CancelledContext", testCancelledContext},
		{"Replies", testReplies},
	}
	for _, g := range append(groups, capabilityGroups(t, cfg)...) {
		t.Run(g.name, func(t *testing.T) {
			g.f(t, &suite{cfg: cfg, id: randomID(t)})
		})
	}
}

// group is a subtest of Run.
type group struct {
	name string
	f    func(*testing.T, *suite)
}

// probeDelay returns the slowest of 10 probes of the delays a real-time test
// meets here: a store call (Exists) and the overshoot of a 1 ms sleep.
func probeDelay(t *testing.T, cfg Config) time.Duration {
	st := cfg.New(t, Options{})
	if st == nil {
		t.Fatal("dedupetest: Config.New returned nil")
	}
	defer st.Close()
	k := dedupe.Key{Channel: "conformance", MessageID: "probe-" + randomID(t)}
	var worst time.Duration
	for range 10 {
		start := time.Now()
		if _, err := st.Exists(context.Background(), k); err != nil {
			t.Fatalf("dedupetest: probe: Exists: %v", err)
		}
		time.Sleep(time.Millisecond)
		worst = max(worst, time.Since(start)-time.Millisecond)
	}
	return worst
}

// suite is the state of one subtest.
type suite struct {
	cfg   Config
	id    string // unique to the subtest, in every key
	clock *Clock
	n     int
}

// open creates a store with the given defaults, closed at the end of the test.
// With a real-time store, ttl and lease are in units of cfg.Unit.
func (s *suite) open(t *testing.T, o Options) dedupe.Store {
	t.Helper()
	if s.cfg.RealTime {
		o.TTL = s.d(o.TTL)
		o.Lease = s.d(o.Lease)
	} else {
		if s.clock == nil {
			s.clock = NewClock(time.Date(2026, 11, 29, 20, 30, 0, 0, time.UTC))
		}
		o.Now = s.clock.Now
	}
	st := s.cfg.New(t, o)
	if st == nil {
		t.Fatal("dedupetest: Config.New returned nil")
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// d converts a duration of the suite to the store's time: unchanged with a
// fake clock, scaled to cfg.Unit per minute in real time.
func (s *suite) d(d time.Duration) time.Duration {
	if !s.cfg.RealTime || d == 0 {
		return d
	}
	return time.Duration(float64(d) / float64(time.Minute) * float64(s.cfg.Unit))
}

// now returns the time of the store's clock: the fake clock's, or in real
// time the local clock's.
func (s *suite) now() time.Time {
	if s.cfg.RealTime {
		return time.Now()
	}
	return s.clock.Now()
}

// tolerance is how far an expiry a store reports may be from the one the
// test set: a millisecond with a fake clock (stores keep microseconds), one
// unit in real time, where the store adds the remaining time its server
// reports to the local clock, across a round trip.
func (s *suite) tolerance() time.Duration {
	if s.cfg.RealTime {
		return s.cfg.Unit
	}
	return time.Millisecond
}

// wait lets d (in suite time) pass.
func (s *suite) wait(d time.Duration) {
	if s.cfg.RealTime {
		time.Sleep(s.d(d))
		return
	}
	s.clock.Advance(d)
}

// key returns a new key unique to this run.
func (s *suite) key() dedupe.Key {
	s.n++
	return dedupe.Key{Channel: "conformance", MessageID: fmt.Sprintf("%s-%d", s.id, s.n)}
}

func randomID(t *testing.T) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

func exists(t *testing.T, st dedupe.Store, k dedupe.Key) bool {
	t.Helper()
	ok, err := st.Exists(context.Background(), k)
	if err != nil {
		t.Fatalf("Exists(%s): %v", k, err)
	}
	return ok
}

func mark(t *testing.T, st dedupe.Store, k dedupe.Key, ttl time.Duration) {
	t.Helper()
	if err := st.Mark(context.Background(), k, ttl); err != nil {
		t.Fatalf("Mark(%s, %v): %v", k, ttl, err)
	}
}

// claim claims k with a new token and checks the outcome.
func claim(t *testing.T, st dedupe.Store, k dedupe.Key, lease time.Duration, want dedupe.Status) dedupe.Claim {
	t.Helper()
	return claimAs(t, st, dedupe.NewClaim(k), lease, want)
}

// claimAs claims c and checks the outcome.
func claimAs(t *testing.T, st dedupe.Store, c dedupe.Claim, lease time.Duration, want dedupe.Status) dedupe.Claim {
	t.Helper()
	got, err := st.Claim(context.Background(), c, lease)
	if err != nil {
		t.Fatalf("Claim(%s, %v): %v", c.Key, lease, err)
	}
	if got != want {
		t.Fatalf("Claim(%s, %v) = %v, want %v", c.Key, lease, got, want)
	}
	return c
}

func wantExists(t *testing.T, st dedupe.Store, k dedupe.Key, want bool, when string) {
	t.Helper()
	if got := exists(t, st, k); got != want {
		t.Fatalf("Exists(%s) %s = %v, want %v", k, when, got, want)
	}
}

func wantErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
	if err != nil && !strings.HasPrefix(err.Error(), "dedupe") && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: error %q is not prefixed with the package name", what, err)
	}
}
