package dedupetest

import (
	"context"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The tests of marks: Exists, Mark and their TTLs.

func testMarkExists(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	k, other := s.key(), s.key()
	wantExists(t, st, k, false, "before Mark")
	mark(t, st, k, time.Hour)
	wantExists(t, st, k, true, "after Mark")
	wantExists(t, st, other, false, "for an unmarked key")
	if b := st.Backend(); b == "" {
		t.Error("Backend() is empty")
	}
}

func testTTLExpiry(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	k := s.key()
	mark(t, st, k, s.d(10*time.Minute))
	s.wait(5 * time.Minute)
	wantExists(t, st, k, true, "halfway through its TTL")
	s.wait(8 * time.Minute)
	wantExists(t, st, k, false, "after its TTL")
	// An expired mark is absent in every method: the key can be claimed.
	c := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	wantExists(t, st, k, false, "while claimed after expiry")
	if err := st.Release(context.Background(), c); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// And marked again.
	mark(t, st, k, s.d(10*time.Minute))
	wantExists(t, st, k, true, "marked again after expiry")
}

func testRemark(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	longer, shorter := s.key(), s.key()
	mark(t, st, longer, s.d(10*time.Minute))
	mark(t, st, shorter, s.d(100*time.Minute))
	s.wait(6 * time.Minute)
	mark(t, st, longer, s.d(10*time.Minute)) // now expires at 16
	mark(t, st, shorter, s.d(2*time.Minute)) // now expires at 8
	s.wait(6 * time.Minute)                  // 12
	wantExists(t, st, longer, true, "after a re-mark extended its TTL")
	wantExists(t, st, shorter, false, "after a re-mark shortened its TTL")
	s.wait(7 * time.Minute) // 19
	wantExists(t, st, longer, false, "after the re-marked TTL")
}

func testDefaultTTL(t *testing.T, s *suite) {
	if s.cfg.RealTime {
		st := s.open(t, Options{TTL: 10 * time.Minute})
		k := s.key()
		mark(t, st, k, 0)
		s.wait(4 * time.Minute)
		wantExists(t, st, k, true, "within the configured default TTL")
		s.wait(10 * time.Minute)
		wantExists(t, st, k, false, "after the configured default TTL")
		return
	}
	t.Run("builtin", func(t *testing.T) {
		st := s.open(t, Options{})
		k, neg := s.key(), s.key()
		mark(t, st, k, 0)
		mark(t, st, neg, -time.Second)
		s.wait(dedupe.DefaultTTL - time.Minute)
		wantExists(t, st, k, true, "just before 24 h")
		wantExists(t, st, neg, true, "just before 24 h (negative ttl)")
		s.wait(2 * time.Minute)
		wantExists(t, st, k, false, "just after 24 h")
		wantExists(t, st, neg, false, "just after 24 h (negative ttl)")
	})
	t.Run("configured", func(t *testing.T) {
		st := s.open(t, Options{TTL: 2 * time.Hour})
		k := s.key()
		mark(t, st, k, 0)
		s.wait(2*time.Hour - time.Minute)
		wantExists(t, st, k, true, "just before the configured 2 h")
		s.wait(2 * time.Minute)
		wantExists(t, st, k, false, "just after the configured 2 h")
	})
}

func testDefaultLease(t *testing.T, s *suite) {
	lease, opts := dedupe.DefaultLease, Options{}
	if s.cfg.RealTime {
		lease, opts = 10*time.Minute, Options{Lease: 10 * time.Minute}
	}
	st := s.open(t, opts)
	k := s.key()
	claim(t, st, k, 0, dedupe.Claimed)
	s.wait(lease * 4 / 10)
	claim(t, st, k, 0, dedupe.InFlight)
	s.wait(lease*6/10 + lease*3/10)
	claim(t, st, k, 0, dedupe.Claimed)
}
