package dedupetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The tests of claims: Claim, Extend, Release, leases and tokens.

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
	raceDuplicates(t, st, ks, racers)
}

// raceDuplicates claims the marked keys ks from racers goroutines at once and
// fails unless every claim is a duplicate.
func raceDuplicates(t *testing.T, st dedupe.Store, ks []dedupe.Key, racers int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, racers)
	for g := 0; g < racers; g++ {
		wg.Go(func() {
			k := ks[g%len(ks)]
			status, err := st.Claim(context.Background(), dedupe.NewClaim(k), time.Hour)
			if err == nil && status != dedupe.Duplicate {
				err = fmt.Errorf("Claim(%s) of a marked key = %v", k, status)
			}
			errs <- err
		})
	}
	wg.Wait()
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
