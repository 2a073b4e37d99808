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
// Keys are unique to each run, so stores that share a server need not be empty.
package dedupetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
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
	// slow server.
	Unit time.Duration
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, cfg Config) {
	if cfg.New == nil {
		t.Fatal("dedupetest: Config.New is nil")
	}
	if cfg.Unit <= 0 {
		cfg.Unit = 60 * time.Millisecond
	}
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *suite)
	}{
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
		{"KeyForms", testKeyForms},
		{"InvalidKeys", testInvalidKeys},
		{"Closed", testClosed},
		{"CancelledContext", testCancelledContext},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f(t, &suite{cfg: cfg, id: randomID(t)})
		})
	}
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

func testClaimStatuses(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	k := s.key()
	c := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	wantExists(t, st, k, false, "while claimed")
	claim(t, st, k, s.d(10*time.Minute), dedupe.InFlight)
	mark(t, st, k, s.d(10*time.Minute))
	claim(t, st, k, s.d(10*time.Minute), dedupe.Duplicate)
	wantErr(t, st.Release(context.Background(), c), dedupe.ErrNotOwner, "Release after Mark")
}

func testClaimExclusive(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	// An hour, unscaled, so that no lease runs out while the racers run,
	// however slow a real-time store's server is.
	const keys, racers = 16, 64
	ks := make([]dedupe.Key, keys)
	for i := range ks {
		ks[i] = s.key()
	}
	type result struct {
		key    int
		status dedupe.Status
		err    error
	}
	results := make(chan result, keys*racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < racers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for i := range ks {
				i := (i + g) % keys // different goroutines race in different orders
				status, err := st.Claim(context.Background(), dedupe.NewClaim(ks[i]), time.Hour)
				results <- result{i, status, err}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(results)
	claimed := make([]int, keys)
	for r := range results {
		switch {
		case r.err != nil:
			t.Fatalf("Claim(%s): %v", ks[r.key], r.err)
		case r.status == dedupe.Claimed:
			claimed[r.key]++
		case r.status != dedupe.InFlight:
			t.Fatalf("Claim(%s) = %v, want claimed or in flight", ks[r.key], r.status)
		}
	}
	for i, n := range claimed {
		if n != 1 {
			t.Errorf("%s claimed %d times by %d racers, want exactly once", ks[i], n, racers)
		}
	}
	// Once marked, every racer sees a duplicate.
	for _, k := range ks {
		mark(t, st, k, time.Hour)
	}
	var dupWG sync.WaitGroup
	errs := make(chan error, racers)
	for g := 0; g < racers; g++ {
		dupWG.Add(1)
		go func() {
			defer dupWG.Done()
			status, err := st.Claim(context.Background(), dedupe.NewClaim(ks[g%keys]), time.Hour)
			if err == nil && status != dedupe.Duplicate {
				err = fmt.Errorf("Claim(%s) of a marked key = %v", ks[g%keys], status)
			}
			errs <- err
		}()
	}
	dupWG.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func testLeaseExpiry(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	k := s.key()
	first := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	s.wait(6 * time.Minute)
	claim(t, st, k, s.d(10*time.Minute), dedupe.InFlight)
	s.wait(7 * time.Minute)
	second := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	if second.Token == first.Token {
		t.Fatalf("reclaim after lease expiry reused token %q", first.Token)
	}
	wantErr(t, st.Release(context.Background(), first), dedupe.ErrNotOwner, "Release of the expired claim")
	wantErr(t, st.Extend(context.Background(), first, s.d(10*time.Minute)), dedupe.ErrNotOwner, "Extend of the expired claim")
	claim(t, st, k, s.d(10*time.Minute), dedupe.InFlight) // the stale calls left the new claim alone
	if err := st.Release(context.Background(), second); err != nil {
		t.Fatalf("Release of the live claim: %v", err)
	}
	claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)

	// A claim whose lease ran out, and that nobody took over, no longer holds the key.
	k2 := s.key()
	c := claim(t, st, k2, s.d(5*time.Minute), dedupe.Claimed)
	s.wait(7 * time.Minute)
	wantErr(t, st.Release(context.Background(), c), dedupe.ErrNotOwner, "Release after the lease ran out")
}

func testReleaseStale(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	k := s.key()
	c := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	ctx := context.Background()

	forged := c
	forged.Token = c.Token[:len(c.Token)-1] + string(rune('a'+(c.Token[len(c.Token)-1]+1)%26))
	wantErr(t, st.Release(ctx, forged), dedupe.ErrNotOwner, "Release with another token")
	empty := c
	empty.Token = ""
	wantErr(t, st.Release(ctx, empty), dedupe.ErrNotOwner, "Release with an empty token")
	other := c
	other.Key = s.key()
	wantErr(t, st.Release(ctx, other), dedupe.ErrNotOwner, "Release of another key with this token")
	claim(t, st, k, s.d(10*time.Minute), dedupe.InFlight) // still held

	if err := st.Release(ctx, c); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantErr(t, st.Release(ctx, c), dedupe.ErrNotOwner, "second Release")
	wantExists(t, st, k, false, "after Release")
	claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
}

func testMarkClearsClaim(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	k := s.key()
	c := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	mark(t, st, k, s.d(20*time.Minute))
	wantExists(t, st, k, true, "after Mark of a claimed key")
	claim(t, st, k, s.d(10*time.Minute), dedupe.Duplicate)
	wantErr(t, st.Extend(context.Background(), c, s.d(10*time.Minute)), dedupe.ErrNotOwner, "Extend after Mark")
	wantErr(t, st.Release(context.Background(), c), dedupe.ErrNotOwner, "Release after Mark")
	// The mark keeps its own TTL, not the lease's.
	s.wait(15 * time.Minute)
	wantExists(t, st, k, true, "after the lease but within the TTL")
}

func testExtend(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	k := s.key()
	c := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	s.wait(7 * time.Minute)
	if err := st.Extend(context.Background(), c, s.d(10*time.Minute)); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	s.wait(7 * time.Minute) // 14 min after the claim, 7 after the extension
	claim(t, st, k, s.d(10*time.Minute), dedupe.InFlight)
	wantExists(t, st, k, false, "while an extended claim is held")
	forged := c
	forged.Token = strings.Repeat("0", len(c.Token))
	wantErr(t, st.Extend(context.Background(), forged, s.d(10*time.Minute)), dedupe.ErrNotOwner, "Extend with another token")
	s.wait(6 * time.Minute) // 13 after the extension
	wantErr(t, st.Extend(context.Background(), c, s.d(10*time.Minute)), dedupe.ErrNotOwner, "Extend after the lease ran out")
	claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
}

func testKeyForms(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	base := s.key().MessageID
	keys := []dedupe.Key{
		{Channel: "web", MessageID: base + ":a:b"},
		{Channel: "web", MessageID: base + ":a"},
		{Channel: "Web", MessageID: base + ":a"},
		{Channel: "qq", MessageID: base + "-消息-😀"},
		{Channel: "discord", MessageID: base + "-" + strings.Repeat("9", dedupe.MaxMessageIDLen-len(base)-1)},
		{Channel: strings.Repeat("c", dedupe.MaxChannelLen), MessageID: base},
		{Channel: "sql", MessageID: base + "'; DROP TABLE x; --"},
		{Channel: "pct", MessageID: base + "%_*?[]{}"},
	}
	for i, k := range keys {
		if err := k.Validate(); err != nil {
			t.Fatalf("test key %d invalid: %v", i, err)
		}
		for _, m := range keys[:i] {
			wantExists(t, st, m, true, "for an earlier key")
		}
		wantExists(t, st, k, false, "before its Mark")
		mark(t, st, k, s.d(10*time.Minute))
		wantExists(t, st, k, true, "after Mark")
	}
	wantExists(t, st, dedupe.Key{Channel: "web", MessageID: base}, false, "for a prefix of a marked id")
}

func invalidKeys() []dedupe.Key {
	return []dedupe.Key{
		{},
		{Channel: "telegram"},
		{MessageID: "1"},
		{Channel: "a:b", MessageID: "1"},
		{Channel: "ok", MessageID: "nul\x00byte"},
		{Channel: "ok", MessageID: "bad\xffutf8"},
		{Channel: "ok", MessageID: "new\nline"},
		{Channel: "ok", MessageID: strings.Repeat("x", dedupe.MaxMessageIDLen+1)},
		{Channel: strings.Repeat("c", dedupe.MaxChannelLen+1), MessageID: "1"},
	}
}

func testInvalidKeys(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	ctx := context.Background()
	for _, k := range invalidKeys() {
		_, err := st.Exists(ctx, k)
		wantErr(t, err, dedupe.ErrInvalidKey, fmt.Sprintf("Exists(%q)", k))
		wantErr(t, st.Mark(ctx, k, time.Hour), dedupe.ErrInvalidKey, fmt.Sprintf("Mark(%q)", k))
		status, err := st.Claim(ctx, dedupe.NewClaim(k), time.Hour)
		wantErr(t, err, dedupe.ErrInvalidKey, fmt.Sprintf("Claim(%q)", k))
		if status == dedupe.Claimed {
			t.Fatalf("Claim(%q) returned a claim with an error", k)
		}
		bad := dedupe.Claim{Key: k, Token: "0123456789abcdef"}
		wantErr(t, st.Release(ctx, bad), dedupe.ErrInvalidKey, fmt.Sprintf("Release(%q)", k))
		wantErr(t, st.Extend(ctx, bad, time.Hour), dedupe.ErrInvalidKey, fmt.Sprintf("Extend(%q)", k))
	}
	// The valid prefix of an overlong id was not stored.
	trunc := dedupe.Key{Channel: "ok", MessageID: strings.Repeat("x", dedupe.MaxMessageIDLen)}
	wantExists(t, st, trunc, false, "for the truncation of a refused key")
	// The store still works.
	k := s.key()
	mark(t, st, k, s.d(10*time.Minute))
	wantExists(t, st, k, true, "after refused keys")
}

func testClosed(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	k := s.key()
	c := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ctx := context.Background()
	_, err := st.Exists(ctx, k)
	wantErr(t, err, dedupe.ErrClosed, "Exists after Close")
	wantErr(t, st.Mark(ctx, k, time.Hour), dedupe.ErrClosed, "Mark after Close")
	_, err = st.Claim(ctx, dedupe.NewClaim(s.key()), time.Hour)
	wantErr(t, err, dedupe.ErrClosed, "Claim after Close")
	wantErr(t, st.Extend(ctx, c, time.Hour), dedupe.ErrClosed, "Extend after Close")
	wantErr(t, st.Release(ctx, c), dedupe.ErrClosed, "Release after Close")
	if st.Backend() == "" {
		t.Error("Backend() after Close is empty")
	}
}

func testCancelledContext(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := s.key()
	held := claim(t, st, s.key(), s.d(10*time.Minute), dedupe.Claimed)

	_, err := st.Exists(ctx, k)
	wantErr(t, err, context.Canceled, "Exists with a cancelled context")
	wantErr(t, st.Mark(ctx, k, time.Hour), context.Canceled, "Mark with a cancelled context")
	wantExists(t, st, k, false, "after a cancelled Mark")
	_, err = st.Claim(ctx, dedupe.NewClaim(k), time.Hour)
	wantErr(t, err, context.Canceled, "Claim with a cancelled context")
	claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed) // the cancelled Claim took nothing
	wantErr(t, st.Extend(ctx, held, time.Hour), context.Canceled, "Extend with a cancelled context")
	wantErr(t, st.Release(ctx, held), context.Canceled, "Release with a cancelled context")
	claim(t, st, held.Key, s.d(10*time.Minute), dedupe.InFlight) // the cancelled Release dropped nothing

	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	_, err = st.Exists(expired, k)
	wantErr(t, err, context.DeadlineExceeded, "Exists past its deadline")
}

// A claim retried with its own token is still the caller's, with a new lease;
// another token is refused.
func testClaimIdempotent(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	ctx := context.Background()
	c := claim(t, st, s.key(), s.d(10*time.Minute), dedupe.Claimed)
	s.wait(7 * time.Minute)
	claimAs(t, st, c, s.d(10*time.Minute), dedupe.Claimed) // lease now ends at 17
	claim(t, st, c.Key, s.d(10*time.Minute), dedupe.InFlight)
	s.wait(7 * time.Minute) // 14: past the first lease, within the renewed one
	claim(t, st, c.Key, s.d(10*time.Minute), dedupe.InFlight)
	if err := st.Extend(ctx, c, s.d(10*time.Minute)); err != nil {
		t.Fatalf("Extend after a repeated Claim: %v", err)
	}
	if err := st.Release(ctx, c); err != nil {
		t.Fatalf("Release after a repeated Claim: %v", err)
	}
	// Released, the key is free for anyone; the old token holds nothing.
	wantErr(t, st.Release(ctx, c), dedupe.ErrNotOwner, "second Release")
	other := claim(t, st, c.Key, s.d(10*time.Minute), dedupe.Claimed)
	claimAs(t, st, c, s.d(10*time.Minute), dedupe.InFlight)
	// A marked key is a duplicate for its former owner too.
	mark(t, st, other.Key, s.d(10*time.Minute))
	claimAs(t, st, other, s.d(10*time.Minute), dedupe.Duplicate)
}

func testInvalidTokens(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	ctx := context.Background()
	k := s.key()
	for _, tok := range []string{"", "has space", "nul\x00", "\xff\xfe", "new\nline", strings.Repeat("t", 65)} {
		status, err := st.Claim(ctx, dedupe.Claim{Key: k, Token: tok}, s.d(10*time.Minute))
		wantErr(t, err, dedupe.ErrInvalidKey, fmt.Sprintf("Claim with token %q", tok))
		if status == dedupe.Claimed {
			t.Fatalf("Claim with token %q claimed", tok)
		}
	}
	long := dedupe.Claim{Key: k, Token: strings.Repeat("t", 64)}
	claimAs(t, st, long, s.d(10*time.Minute), dedupe.Claimed)
	if err := st.Release(ctx, long); err != nil {
		t.Fatalf("Release with a 64-byte token: %v", err)
	}
}

// A claim in flight holds its key however many other keys are marked: stores
// evict marks to make room, never claims.
func testClaimsNotEvicted(t *testing.T, s *suite) {
	// An hour, unscaled: nothing here may expire, however slow the server.
	const size = 200
	st := s.open(t, Options{MaxSize: size})
	ctx := context.Background()
	c := claim(t, st, s.key(), time.Hour, dedupe.Claimed)
	flood := 3 * size
	for i := 0; i < flood; i++ {
		k := s.key()
		mark(t, st, k, time.Hour)
		if i%7 == 0 { // claims come and go around it too
			o := claim(t, st, s.key(), time.Hour, dedupe.Claimed)
			if err := st.Release(ctx, o); err != nil {
				t.Fatalf("Release of a passing claim: %v", err)
			}
		}
	}
	claim(t, st, c.Key, time.Hour, dedupe.InFlight)
	if err := st.Extend(ctx, c, time.Hour); err != nil {
		t.Fatalf("Extend after %d marks: %v", flood, err)
	}
	if err := st.Release(ctx, c); err != nil {
		t.Fatalf("Release after %d marks: %v", flood, err)
	}
	c = claim(t, st, c.Key, time.Hour, dedupe.Claimed)
	mark(t, st, c.Key, time.Hour)
	wantExists(t, st, c.Key, true, "after its owner's Mark")
}

// Claims made with deadlines so short that many fail, some after the store
// took them: releasing each failed claim by its token leaves every key free or
// held by a claim whose caller knows it.
func testNothingStranded(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	const n = 200
	type try struct {
		c      dedupe.Claim
		status dedupe.Status
		err    error
	}
	tries := make([]try, n)
	var wg sync.WaitGroup
	for i := range tries {
		tries[i].c = dedupe.NewClaim(s.key())
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%6)*time.Millisecond)
			defer cancel()
			tries[i].status, tries[i].err = st.Claim(ctx, tries[i].c, time.Hour)
		}()
	}
	wg.Wait()
	failed := 0
	for _, tr := range tries {
		if tr.err == nil {
			if tr.status != dedupe.Claimed {
				t.Fatalf("Claim(%s) of a new key = %v", tr.c.Key, tr.status)
			}
			continue
		}
		failed++
		err := st.Release(context.Background(), tr.c)
		if err != nil && !errors.Is(err, dedupe.ErrNotOwner) {
			t.Fatalf("Release after a failed Claim(%s): %v", tr.c.Key, err)
		}
		// The key is free at once, for a new claim, not after a lease.
		claim(t, st, tr.c.Key, time.Hour, dedupe.Claimed)
	}
	t.Logf("%d of %d claims failed; none stranded", failed, n)
}
