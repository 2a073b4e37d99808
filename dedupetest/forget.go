package dedupetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The tests of a store that forgets marks ([dedupe.Forgetter]). A store
// made of others (a LayeredStore, dedupeotel's Store) has the method
// whatever it is made of, and fails with [errors.ErrUnsupported] when a
// part of it cannot forget: the group is then skipped.

// testForgetter runs the subtests of [dedupe.Forgetter] on one store.
func testForgetter(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	if _, err := st.(dedupe.Forgetter).Forget(context.Background(), s.key()); errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("the store cannot forget: %v", err)
	}
	for _, sub := range []struct {
		name string
		f    func(*testing.T, *suite, dedupe.Store)
	}{
		{"Marked", testForgetMarked},
		{"RefusedWhileClaimed", testForgetClaimed},
		{"Absent", testForgetAbsent},
		{"Inputs", testForgetInputs},
		{"ClaimRace", testForgetClaimRace},
	} {
		t.Run(sub.name, func(t *testing.T) { sub.f(t, s, st) })
	}
}

// forget calls Forget(k) and checks its outcome.
func forget(t *testing.T, st dedupe.Store, k dedupe.Key, want bool, when string) {
	t.Helper()
	got, err := st.(dedupe.Forgetter).Forget(context.Background(), k)
	if err != nil {
		t.Fatalf("Forget(%s) %s: %v", k, when, err)
	}
	if got != want {
		t.Fatalf("Forget(%s) %s = %v, want %v", k, when, got, want)
	}
}

// wantForgetErr calls Forget(k) with ctx and checks that it fails with target.
func wantForgetErr(t *testing.T, ctx context.Context, st dedupe.Store, k dedupe.Key, target error, when string) {
	t.Helper()
	got, err := st.(dedupe.Forgetter).Forget(ctx, k)
	wantErr(t, err, target, fmt.Sprintf("Forget(%q) %s", k, when))
	if got {
		t.Fatalf("Forget(%q) %s reported a mark forgotten with its error", k, when)
	}
}

// A forgotten mark is gone with its result: the key is new to Exists,
// Result and Claim, a Forget again says false, a new Mark holds without the
// old result, and other keys keep their marks.
func testForgetMarked(t *testing.T, s *suite, st dedupe.Store) {
	k, other := s.key(), s.key()
	markResult(t, st, k, []byte("first run"), s.d(10*time.Minute))
	mark(t, st, other, s.d(10*time.Minute))
	forget(t, st, k, true, "of a marked key")
	wantExists(t, st, k, false, "after Forget")
	wantResult(t, st, k, nil, false, "after Forget")
	wantExists(t, st, other, true, "of another key after Forget")
	forget(t, st, k, false, "again")
	c := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	mark(t, st, c.Key, s.d(10*time.Minute))
	wantResult(t, st, k, nil, true, "after a new Mark") // the old result did not come back

	plain := s.key()
	mark(t, st, plain, s.d(10*time.Minute))
	forget(t, st, plain, true, "of a key marked without a result")
	claim(t, st, plain, s.d(10*time.Minute), dedupe.Claimed)
}

// A live claim refuses Forget with ErrInFlight and keeps the key; once the
// claim is released, or its lease ran out, Forget goes through (false: no
// mark) and the key can be claimed.
func testForgetClaimed(t *testing.T, s *suite, st dedupe.Store) {
	ctx := context.Background()
	k := s.key()
	c := claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
	wantForgetErr(t, ctx, st, k, dedupe.ErrInFlight, "while claimed")
	claim(t, st, k, s.d(10*time.Minute), dedupe.InFlight)
	if err := st.Extend(ctx, c, s.d(10*time.Minute)); err != nil {
		t.Fatalf("Extend after a refused Forget: %v", err)
	}
	if err := st.Release(ctx, c); err != nil {
		t.Fatalf("Release after a refused Forget: %v", err)
	}
	forget(t, st, k, false, "after Release")
	claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)

	k2 := s.key()
	claim(t, st, k2, s.d(5*time.Minute), dedupe.Claimed)
	s.wait(7 * time.Minute)
	forget(t, st, k2, false, "after the lease ran out")
	claim(t, st, k2, s.d(10*time.Minute), dedupe.Claimed)
}

// A key never written, or whose mark expired, is (false, nil).
func testForgetAbsent(t *testing.T, s *suite, st dedupe.Store) {
	forget(t, st, s.key(), false, "of a key never written")
	k := s.key()
	mark(t, st, k, s.d(5*time.Minute))
	s.wait(7 * time.Minute)
	forget(t, st, k, false, "of an expired mark")
	claim(t, st, k, s.d(10*time.Minute), dedupe.Claimed)
}

// Invalid keys, a cancelled context and a closed store are refused, and
// change nothing.
func testForgetInputs(t *testing.T, s *suite, st dedupe.Store) {
	for _, k := range invalidKeys() {
		wantForgetErr(t, context.Background(), st, k, dedupe.ErrInvalidKey, "of an invalid key")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	k := s.key()
	mark(t, st, k, s.d(10*time.Minute))
	wantForgetErr(t, ctx, st, k, context.Canceled, "with a cancelled context")
	wantExists(t, st, k, true, "after a cancelled Forget")

	closed := s.open(t, Options{})
	mark(t, closed, k, s.d(10*time.Minute))
	if err := closed.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantForgetErr(t, context.Background(), closed, k, dedupe.ErrClosed, "after Close")
	wantExists(t, st, k, true, "after a Forget on a closed store")
}

// Forgets and claims of marked keys race: a claim is taken only once its
// key's mark is forgotten, at most once per key, and no Forget drops it: it
// still holds its key afterwards, and every Forget after it was refused.
func testForgetClaimRace(t *testing.T, s *suite, st dedupe.Store) {
	// An hour, unscaled: no lease or mark may run out while the racers run.
	const keys, racers = 16, 8
	ks := make([]dedupe.Key, keys)
	for i := range ks {
		ks[i] = s.key()
		mark(t, st, ks[i], time.Hour)
	}
	var mu sync.Mutex
	claims := make([][]dedupe.Claim, keys) // the claims taken, by key
	forgotten := make([]int, keys)
	var wg sync.WaitGroup
	errs := make(chan error, 2*keys*racers)
	start := make(chan struct{})
	for g := range racers {
		wg.Go(func() {
			<-start
			for i := range ks {
				i := (i + g) % keys
				c := dedupe.NewClaim(ks[i])
				status, err := st.Claim(context.Background(), c, time.Hour)
				ok, ferr := st.(dedupe.Forgetter).Forget(context.Background(), ks[i])
				if errors.Is(ferr, dedupe.ErrInFlight) {
					ferr = nil
				}
				mu.Lock()
				if status == dedupe.Claimed {
					claims[i] = append(claims[i], c)
				}
				if ok {
					forgotten[i]++
				}
				mu.Unlock()
				errs <- errors.Join(err, ferr)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i, k := range ks {
		checkRaced(t, st, k, claims[i], forgotten[i])
	}
}

// checkRaced checks key k after testForgetClaimRace: its mark was forgotten
// (a layered store may say so twice, from two layers), and the one claim
// taken, if any, still holds it.
func checkRaced(t *testing.T, st dedupe.Store, k dedupe.Key, claims []dedupe.Claim, forgotten int) {
	t.Helper()
	if forgotten == 0 || len(claims) > 1 {
		t.Fatalf("%s: forgotten %d times and claimed %d times by the racers, want at least once and at most once", k, forgotten, len(claims))
	}
	if len(claims) == 0 {
		claim(t, st, k, time.Hour, dedupe.Claimed) // every racer claimed before the mark was forgotten
		return
	}
	if err := st.Extend(context.Background(), claims[0], time.Hour); err != nil {
		t.Fatalf("%s: the claim taken in the race no longer holds its key: Extend: %v", k, err)
	}
	wantForgetErr(t, context.Background(), st, k, dedupe.ErrInFlight, "after the race")
}
