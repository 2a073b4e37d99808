package dedupetest

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The tests of [dedupe.BatchStore]: ClaimEach, ExtendEach, ReleaseEach and
// MarkEach, each its one-key peer applied to every item in order, one error
// per item.

// largeBatch is the length of the batch of testEachLarge: more items than
// any store sends in one round trip (SQLite's variables per statement,
// PostgreSQL's parameters, a sensible pipeline), so that every store must
// split it.
const largeBatch = 5000

// testBatchStore runs the subtests of the BatchStore group.
func testBatchStore(t *testing.T, s *suite) {
	for _, g := range []group{
		{"ClaimStatuses", testEachClaimStatuses},
		{"OneKeyInOrder", testEachOneKey},
		{"Invalid", testEachInvalid},
		{"KeyForms", testEachKeyForms},
		{"ExtendRelease", testEachExtendRelease},
		{"Mark", testEachMark},
		{"Expiry", testEachExpiry},
		{"Large", testEachLarge},
		{"Empty", testEachEmpty},
		{"Cancelled", testEachCancelled},
		{"Closed", testEachClosed},
		{"AgreesWithOneKey", testEachAgrees},
		{"Exclusive", testEachExclusive},
	} {
		t.Run(g.name, func(t *testing.T) {
			g.f(t, &suite{cfg: s.cfg, id: randomID(t)})
		})
	}
}

// batchOf returns st as a BatchStore.
func batchOf(st dedupe.Store) dedupe.BatchStore { return st.(dedupe.BatchStore) }

// wantEach checks errs, the errors a batch call named what returned, against
// want, one for each item: nil where nil is wanted, and otherwise an error
// that is the one wanted (and prefixed as wantErr requires).
func wantEach(t *testing.T, what string, errs []error, want ...error) {
	t.Helper()
	if len(errs) != len(want) {
		t.Fatalf("%s returned %d errors for %d items", what, len(errs), len(want))
	}
	for i, err := range errs {
		if want[i] == nil {
			if err != nil {
				t.Fatalf("%s: item %d: %v", what, i, err)
			}
			continue
		}
		wantErr(t, err, want[i], fmt.Sprintf("%s: item %d", what, i))
	}
}

// wantClaimEach checks what ClaimEach returned against the statuses wanted
// and, where wantErrs[i] is not nil, the error wanted instead (with any
// status but Claimed). wantErrs may be nil: no error is wanted.
func wantClaimEach(t *testing.T, statuses []dedupe.Status, errs []error, want []dedupe.Status, wantErrs []error) {
	t.Helper()
	if wantErrs == nil {
		wantErrs = make([]error, len(want))
	}
	if len(statuses) != len(want) {
		t.Fatalf("ClaimEach returned %d statuses for %d claims", len(statuses), len(want))
	}
	wantEach(t, "ClaimEach", errs, wantErrs...)
	for i, got := range statuses {
		switch {
		case wantErrs[i] != nil && got == dedupe.Claimed:
			t.Fatalf("ClaimEach: item %d: claimed with the error %v", i, errs[i])
		case wantErrs[i] == nil && got != want[i]:
			t.Fatalf("ClaimEach: item %d = %v, want %v", i, got, want[i])
		}
	}
}

// claimEach runs ClaimEach of claims for lease, and checks that item i
// returns want[i] without an error.
func claimEach(t *testing.T, st dedupe.Store, claims []dedupe.Claim, lease time.Duration, want ...dedupe.Status) {
	t.Helper()
	statuses, errs := batchOf(st).ClaimEach(context.Background(), claims, lease)
	wantClaimEach(t, statuses, errs, want, nil)
}

// newClaims returns a claim with a new token for each key.
func newClaims(keys ...dedupe.Key) []dedupe.Claim {
	claims := make([]dedupe.Claim, len(keys))
	for i, k := range keys {
		claims[i] = dedupe.NewClaim(k)
	}
	return claims
}

// testEachClaimStatuses claims in one batch a new key, a marked key, a key
// claimed with another token and a key held by the batch's own token: they
// are Claimed, Duplicate, InFlight and Claimed with the lease set anew.
func testEachClaimStatuses(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	lease := s.d(20 * time.Minute) // wide: 9 units of slack each way on a loaded machine
	fresh, marked, held, own := s.key(), s.key(), s.key(), s.key()
	mark(t, st, marked, s.d(30*time.Minute))
	other := claim(t, st, held, lease, dedupe.Claimed)
	mine := claim(t, st, own, lease, dedupe.Claimed)
	s.wait(11 * time.Minute) // 11
	batch := []dedupe.Claim{dedupe.NewClaim(fresh), dedupe.NewClaim(marked), dedupe.NewClaim(held), mine}
	claimEach(t, st, batch, lease, dedupe.Claimed, dedupe.Duplicate, dedupe.InFlight, dedupe.Claimed)
	wantExists(t, st, fresh, false, "while claimed by ClaimEach")
	wantExists(t, st, marked, true, "after ClaimEach found it marked")

	s.wait(11 * time.Minute) // 22: past the first leases (20), within those of the batch (31)
	claim(t, st, own, lease, dedupe.InFlight)
	claim(t, st, fresh, lease, dedupe.InFlight)
	wantErr(t, st.Extend(context.Background(), other, lease), dedupe.ErrNotOwner,
		"Extend of the claim ClaimEach found in flight, after its lease")
	claim(t, st, held, lease, dedupe.Claimed) // the refused item took nothing
	for _, c := range []dedupe.Claim{batch[0], mine} {
		if err := st.Release(context.Background(), c); err != nil {
			t.Fatalf("Release of a claim ClaimEach took: %v", err)
		}
	}
	claim(t, st, own, lease, dedupe.Claimed)
}

// testEachOneKey puts several items on one key in a batch: they are done in
// their order, so a second token finds the key in flight, the same token
// claims it again, a second release finds nothing, and a second mark wins.
func testEachOneKey(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b, ctx := batchOf(st), context.Background()
	lease := s.d(10 * time.Minute)
	k, j := s.key(), s.key()
	first, second, same := dedupe.NewClaim(k), dedupe.NewClaim(k), dedupe.NewClaim(j)
	claimEach(t, st, []dedupe.Claim{first, same, second, same}, lease,
		dedupe.Claimed, dedupe.Claimed, dedupe.InFlight, dedupe.Claimed)
	claim(t, st, k, lease, dedupe.InFlight)
	claimAs(t, st, first, lease, dedupe.Claimed) // first holds k, not second
	claim(t, st, j, lease, dedupe.InFlight)

	wantEach(t, "ExtendEach of one claim twice", b.ExtendEach(ctx, []dedupe.Claim{same, second, same}, lease),
		nil, dedupe.ErrNotOwner, nil)
	wantEach(t, "ReleaseEach of one claim twice", b.ReleaseEach(ctx, []dedupe.Claim{first, second, first}),
		nil, dedupe.ErrNotOwner, dedupe.ErrNotOwner)
	claim(t, st, j, lease, dedupe.InFlight) // the ReleaseEach of k left j alone

	// Released, k is free at once: of two new claims the first takes it.
	again := newClaims(k, k)
	claimEach(t, st, again, lease, dedupe.Claimed, dedupe.InFlight)

	wantEach(t, "MarkEach of one key twice",
		b.MarkEach(ctx, []dedupe.Key{k, j, k}, [][]byte{[]byte("first"), nil, []byte("second")}, s.d(10*time.Minute)),
		nil, nil, nil)
	wantResult(t, st, k, []byte("second"), true, "after MarkEach of it twice")
	wantResult(t, st, j, nil, true, "after MarkEach without a result")
	claimEach(t, st, newClaims(k, j, k), lease, dedupe.Duplicate, dedupe.Duplicate, dedupe.Duplicate)
}

// testEachInvalid mixes invalid keys and tokens with valid items in every
// method: each invalid one is refused alone, the valid ones are done.
func testEachInvalid(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b, ctx := batchOf(st), context.Background()
	lease := s.d(10 * time.Minute)
	var claims, invalid []dedupe.Claim // valid items between invalid ones
	var keys []dedupe.Key
	var wantErrs, wantMarks []error
	for _, k := range invalidKeys() {
		good := dedupe.NewClaim(s.key())
		bad := dedupe.Claim{Key: k, Token: "0123456789abcdef"}
		claims, invalid = append(claims, good, bad), append(invalid, bad)
		keys = append(keys, s.key(), k)
		wantErrs = append(wantErrs, nil, dedupe.ErrInvalidKey)
		wantMarks = append(wantMarks, nil, dedupe.ErrInvalidKey)
	}
	var badTokens []dedupe.Claim
	for _, tok := range []string{"", "has space", "nul\x00", "\xff\xfe", strings.Repeat("t", 65)} {
		c := dedupe.Claim{Key: s.key(), Token: tok}
		badTokens = append(badTokens, c)
		claims, wantErrs = append(claims, c, dedupe.NewClaim(s.key())), append(wantErrs, dedupe.ErrInvalidKey, nil)
	}
	want := make([]dedupe.Status, len(claims))
	for i := range want {
		want[i] = dedupe.Claimed
	}
	statuses, errs := b.ClaimEach(ctx, claims, lease)
	wantClaimEach(t, statuses, errs, want, wantErrs)
	for i, c := range claims {
		if wantErrs[i] != nil && c.Key.Validate() == nil {
			claim(t, st, c.Key, lease, dedupe.Claimed) // the refused token took nothing
		}
	}

	// Extend and Release refuse an invalid key as such, and a token no store
	// can have made as a claim not held, as their one-key peers do.
	var held []dedupe.Claim
	var wantHeld []error
	for i, c := range claims {
		if wantErrs[i] == nil {
			bad := invalid[len(held)/2%len(invalid)]
			held, wantHeld = append(held, bad, c), append(wantHeld, dedupe.ErrInvalidKey, nil)
		}
	}
	for _, c := range badTokens {
		held, wantHeld = append(held, c), append(wantHeld, dedupe.ErrNotOwner)
	}
	wantEach(t, "ExtendEach with invalid items", b.ExtendEach(ctx, held, lease), wantHeld...)
	wantEach(t, "ReleaseEach with invalid items", b.ReleaseEach(ctx, held), wantHeld...)
	for i, c := range held {
		if wantHeld[i] == nil {
			claim(t, st, c.Key, lease, dedupe.Claimed) // released
		}
	}

	wantEach(t, "MarkEach with invalid keys", b.MarkEach(ctx, keys, nil, s.d(10*time.Minute)), wantMarks...)
	for i, k := range keys {
		if wantMarks[i] == nil {
			wantExists(t, st, k, true, "after MarkEach with invalid keys beside it")
		}
	}
}

// testEachKeyForms claims, marks and releases keys of every form in
// batches: each is its own key, read back by the one-key calls.
func testEachKeyForms(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b, ctx := batchOf(st), context.Background()
	lease := s.d(10 * time.Minute)
	base := s.key().MessageID
	keys := keyForms(base)
	claims := newClaims(keys...)
	want := make([]dedupe.Status, len(keys))
	results := make([][]byte, len(keys))
	for i, k := range keys {
		want[i] = dedupe.Claimed
		results[i] = []byte(k.String())
	}
	claimEach(t, st, claims, lease, want...)
	for _, k := range keys {
		claim(t, st, k, lease, dedupe.InFlight)
	}
	wantEach(t, "ExtendEach of keys of every form", b.ExtendEach(ctx, claims, lease), make([]error, len(keys))...)
	half := len(keys) / 2
	wantEach(t, "ReleaseEach of keys of every form", b.ReleaseEach(ctx, claims[:half]), make([]error, half)...)
	for _, k := range keys[:half] {
		claim(t, st, k, lease, dedupe.Claimed)
	}
	wantEach(t, "MarkEach of keys of every form", b.MarkEach(ctx, keys, results, s.d(10*time.Minute)), make([]error, len(keys))...)
	for i, k := range keys {
		wantResult(t, st, k, results[i], true, "after MarkEach")
	}
	prefix := dedupe.Key{Channel: "web", MessageID: base}
	wantExists(t, st, prefix, false, "for a prefix of an id MarkEach marked")
	claimEach(t, st, newClaims(prefix), lease, dedupe.Claimed)
}

// testEachExtendRelease extends and releases, in one batch each, claims
// held, claims whose lease ran out, claims of other tokens and keys nobody
// claimed: only those held are renewed or dropped, the others are refused
// alone with ErrNotOwner.
func testEachExtendRelease(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b, ctx := batchOf(st), context.Background()
	lease := s.d(10 * time.Minute)
	kept := claim(t, st, s.key(), lease, dedupe.Claimed)
	gone := claim(t, st, s.key(), lease, dedupe.Claimed)
	lapsed := claim(t, st, s.key(), s.d(3*time.Minute), dedupe.Claimed)
	forged := kept
	forged.Token = strings.Repeat("0", len(kept.Token))
	unheld := dedupe.NewClaim(s.key())
	s.wait(7 * time.Minute) // 7: lapsed's lease ran out
	wantEach(t, "ExtendEach", b.ExtendEach(ctx, []dedupe.Claim{kept, forged, lapsed, unheld, gone}, lease),
		nil, dedupe.ErrNotOwner, dedupe.ErrNotOwner, dedupe.ErrNotOwner, nil)

	s.wait(7 * time.Minute) // 14: past the first leases, within the renewed ones
	claim(t, st, kept.Key, lease, dedupe.InFlight)
	claim(t, st, gone.Key, lease, dedupe.InFlight)
	claim(t, st, unheld.Key, lease, dedupe.Claimed) // ExtendEach took nothing
	taken := claim(t, st, lapsed.Key, lease, dedupe.Claimed)
	wantEach(t, "ReleaseEach", b.ReleaseEach(ctx, []dedupe.Claim{gone, forged, lapsed, unheld}),
		nil, dedupe.ErrNotOwner, dedupe.ErrNotOwner, dedupe.ErrNotOwner)
	claim(t, st, gone.Key, lease, dedupe.Claimed) // free at once
	claim(t, st, kept.Key, lease, dedupe.InFlight)
	claim(t, st, lapsed.Key, lease, dedupe.InFlight) // still the new owner's
	if err := st.Extend(ctx, taken, lease); err != nil {
		t.Fatalf("Extend of the claim a stale ReleaseEach item left alone: %v", err)
	}

	// A mark clears the claim: renewing or releasing it is refused.
	mark(t, st, kept.Key, s.d(10*time.Minute))
	wantEach(t, "ExtendEach after Mark", b.ExtendEach(ctx, []dedupe.Claim{kept}, lease), dedupe.ErrNotOwner)
	wantEach(t, "ReleaseEach after Mark", b.ReleaseEach(ctx, []dedupe.Claim{kept}), dedupe.ErrNotOwner)
	claim(t, st, kept.Key, lease, dedupe.Duplicate)
}

// testEachMark marks keys in one batch with results of every kind: kept,
// none, empty, the largest allowed and one too large, which is refused alone.
// MarkEach clears claims, keeps its own copies of the results, drops them
// when marking again without, and refuses a results slice of the wrong
// length item by item, writing nothing.
func testEachMark(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b, ctx := batchOf(st), context.Background()
	ttl := s.d(10 * time.Minute)
	keys := []dedupe.Key{s.key(), s.key(), s.key(), s.key(), s.key()}
	held := claim(t, st, keys[0], s.d(10*time.Minute), dedupe.Claimed)
	full := bytes.Repeat([]byte{0, 0xff, '\r', '\n', '"', 0x80}, dedupe.MaxResultSize/6+1)[:dedupe.MaxResultSize]
	results := [][]byte{[]byte("first"), nil, {}, full, make([]byte, dedupe.MaxResultSize+1)}
	wantEach(t, "MarkEach", b.MarkEach(ctx, keys, results, ttl), nil, nil, nil, nil, dedupe.ErrTooLarge)
	results[0][0] = 'F' // the caller's slice is the caller's
	wantResult(t, st, keys[0], []byte("first"), true, "after MarkEach")
	wantResult(t, st, keys[1], nil, true, "after MarkEach with a nil result")
	wantResult(t, st, keys[2], nil, true, "after MarkEach with an empty result")
	wantResult(t, st, keys[3], full, true, "after MarkEach with MaxResultSize bytes")
	wantResult(t, st, keys[4], nil, false, "after MarkEach refused its result")
	claim(t, st, keys[4], s.d(10*time.Minute), dedupe.Claimed)
	claim(t, st, keys[0], s.d(10*time.Minute), dedupe.Duplicate)
	wantErr(t, st.Release(ctx, held), dedupe.ErrNotOwner, "Release of a claim MarkEach replaced")

	// Without results, every key is marked without one, dropping its old one.
	plain := []dedupe.Key{keys[0], s.key()}
	wantEach(t, "MarkEach without results", b.MarkEach(ctx, plain, nil, ttl), nil, nil)
	wantResult(t, st, keys[0], nil, true, "after MarkEach without results")
	wantResult(t, st, plain[1], nil, true, "after MarkEach without results")

	// A results slice that is neither nil nor one per key refuses every item.
	fresh := []dedupe.Key{s.key(), s.key()}
	for _, res := range [][][]byte{{}, {[]byte("one")}, {nil, nil, []byte("three")}} {
		what := fmt.Sprintf("MarkEach of %d keys with %d results", len(fresh), len(res))
		wantEach(t, what, b.MarkEach(ctx, fresh, res, ttl), dedupe.ErrInvalidKey, dedupe.ErrInvalidKey)
		for _, k := range fresh {
			wantExists(t, st, k, false, "after "+what)
		}
	}
	s.wait(12 * time.Minute)
	for _, k := range []dedupe.Key{keys[0], keys[1], keys[2], keys[3], plain[1]} {
		wantExists(t, st, k, false, "after MarkEach's TTL")
	}
}

// testEachExpiry checks the TTL and the lease each batch method sets, given
// or the store's default (ttl or lease 0), and that an expired mark or claim
// is absent for ClaimEach.
func testEachExpiry(t *testing.T, s *suite) {
	st := s.open(t, Options{TTL: 20 * time.Minute, Lease: 10 * time.Minute}) // scaled by open
	b, ctx := batchOf(st), context.Background()
	marked, byDefault, short, leased := s.key(), s.key(), s.key(), s.key()
	wantEach(t, "MarkEach for 10 min", b.MarkEach(ctx, []dedupe.Key{marked}, nil, s.d(10*time.Minute)), nil)
	wantEach(t, "MarkEach for the default TTL", b.MarkEach(ctx, []dedupe.Key{byDefault}, [][]byte{[]byte("r")}, 0), nil)
	claimEach(t, st, newClaims(short), s.d(3*time.Minute), dedupe.Claimed)
	claimEach(t, st, newClaims(leased), 0, dedupe.Claimed) // the default lease, 10

	s.wait(6 * time.Minute) // 6: short's lease ran out
	claimEach(t, st, newClaims(marked, byDefault, short, leased), s.d(10*time.Minute),
		dedupe.Duplicate, dedupe.Duplicate, dedupe.Claimed, dedupe.InFlight)

	s.wait(6 * time.Minute) // 12: marked's TTL and leased's default lease ran out
	renewed := newClaims(marked)
	claimEach(t, st, append(renewed, newClaims(byDefault, leased)...), s.d(3*time.Minute),
		dedupe.Claimed, dedupe.Duplicate, dedupe.Claimed)
	wantEach(t, "ExtendEach for the default lease", b.ExtendEach(ctx, renewed, 0), nil) // to 22

	s.wait(6 * time.Minute) // 18: past the 3 min lease, within the default one it was extended for
	claim(t, st, marked, s.d(10*time.Minute), dedupe.InFlight)
	wantResult(t, st, byDefault, []byte("r"), true, "within the default TTL")

	s.wait(6 * time.Minute) // 24: past the default TTL and the extended lease
	wantResult(t, st, byDefault, nil, false, "after the default TTL")
	claimEach(t, st, newClaims(marked, byDefault), s.d(10*time.Minute), dedupe.Claimed, dedupe.Claimed)
}

// testEachLarge runs every method over a batch longer than any store sends
// in one round trip, with a marked key and a key claimed by another token
// in it: every item is done.
func testEachLarge(t *testing.T, s *suite) {
	// Room in every shard of a bounded store for the batch's marks. An hour,
	// unscaled: nothing here may expire, however slow the server.
	st := s.open(t, Options{MaxSize: 10 * largeBatch})
	b, ctx := batchOf(st), context.Background()
	keys := make([]dedupe.Key, largeBatch)
	for i := range keys {
		keys[i] = s.key()
	}
	const markedAt, heldAt = 0, largeBatch/2 + 1
	mark(t, st, keys[markedAt], time.Hour)
	claim(t, st, keys[heldAt], time.Hour, dedupe.Claimed)
	want := func(fresh dedupe.Status) ([]dedupe.Status, []error) {
		statuses, errs := make([]dedupe.Status, largeBatch), make([]error, largeBatch)
		for i := range statuses {
			statuses[i] = fresh
		}
		statuses[markedAt], statuses[heldAt] = dedupe.Duplicate, dedupe.InFlight
		errs[markedAt], errs[heldAt] = dedupe.ErrNotOwner, dedupe.ErrNotOwner
		return statuses, errs
	}
	claims := newClaims(keys...)
	wantStatuses, wantNotOwner := want(dedupe.Claimed)
	statuses, errs := b.ClaimEach(ctx, claims, time.Hour)
	wantClaimEach(t, statuses, errs, wantStatuses, nil)
	wantEach(t, "ExtendEach of a large batch", b.ExtendEach(ctx, claims, time.Hour), wantNotOwner...)
	wantEach(t, "ReleaseEach of a large batch", b.ReleaseEach(ctx, claims), wantNotOwner...)

	claims = newClaims(keys...) // released, the keys are free again
	statuses, errs = b.ClaimEach(ctx, claims, time.Hour)
	wantClaimEach(t, statuses, errs, wantStatuses, nil)
	results := make([][]byte, largeBatch)
	for i := range results {
		if i%7 == 0 {
			results[i] = fmt.Appendf(nil, "result %d", i)
		}
	}
	wantEach(t, "MarkEach of a large batch", b.MarkEach(ctx, keys, results, time.Hour), make([]error, largeBatch)...)
	wantStatuses, _ = want(dedupe.Duplicate)
	wantStatuses[heldAt] = dedupe.Duplicate // marked over its claim
	statuses, errs = b.ClaimEach(ctx, newClaims(keys...), time.Hour)
	wantClaimEach(t, statuses, errs, wantStatuses, nil)
	for i := 0; i < largeBatch; i += 499 {
		wantResult(t, st, keys[i], results[i], true, "after MarkEach of a large batch")
	}
}

// testEachEmpty calls every method with nil and empty batches: no error,
// and empty answers.
func testEachEmpty(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b, ctx := batchOf(st), context.Background()
	for _, claims := range [][]dedupe.Claim{nil, {}} {
		statuses, errs := b.ClaimEach(ctx, claims, time.Hour)
		if len(statuses) != 0 || len(errs) != 0 {
			t.Fatalf("ClaimEach of %#v = %v, %v; want empty", claims, statuses, errs)
		}
		if errs := b.ExtendEach(ctx, claims, time.Hour); len(errs) != 0 {
			t.Fatalf("ExtendEach of %#v = %v; want empty", claims, errs)
		}
		if errs := b.ReleaseEach(ctx, claims); len(errs) != 0 {
			t.Fatalf("ReleaseEach of %#v = %v; want empty", claims, errs)
		}
	}
	for _, keys := range [][]dedupe.Key{nil, {}} {
		for _, results := range [][][]byte{nil, {}} {
			if errs := b.MarkEach(ctx, keys, results, time.Hour); len(errs) != 0 {
				t.Fatalf("MarkEach of %#v with results %#v = %v; want empty", keys, results, errs)
			}
		}
	}
	k := s.key()
	mark(t, st, k, s.d(10*time.Minute)) // the store still works
	claimEach(t, st, newClaims(k), s.d(10*time.Minute), dedupe.Duplicate)
}

// testEachCancelled calls every method with a cancelled context, and one
// past its deadline: every item fails with the context's error, and nothing
// is written.
func testEachCancelled(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b := batchOf(st)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	lease := s.d(10 * time.Minute)
	held := claim(t, st, s.key(), lease, dedupe.Claimed)
	k, marked := s.key(), s.key()
	mark(t, st, marked, s.d(10*time.Minute))
	claims := []dedupe.Claim{dedupe.NewClaim(k), dedupe.NewClaim(held.Key), dedupe.NewClaim(marked), held}
	cancelled := []error{context.Canceled, context.Canceled, context.Canceled, context.Canceled}
	statuses, errs := b.ClaimEach(ctx, claims, lease)
	wantClaimEach(t, statuses, errs, make([]dedupe.Status, len(claims)), cancelled)
	claim(t, st, k, lease, dedupe.Claimed) // the cancelled ClaimEach took nothing
	wantEach(t, "ExtendEach with a cancelled context", b.ExtendEach(ctx, []dedupe.Claim{held, held}, lease), cancelled[:2]...)
	wantEach(t, "ReleaseEach with a cancelled context", b.ReleaseEach(ctx, []dedupe.Claim{held, held}), cancelled[:2]...)
	claim(t, st, held.Key, lease, dedupe.InFlight) // the cancelled ReleaseEach dropped nothing
	fresh := []dedupe.Key{s.key(), s.key()}
	wantEach(t, "MarkEach with a cancelled context",
		b.MarkEach(ctx, fresh, [][]byte{[]byte("r"), nil}, time.Hour), cancelled[:2]...)
	for _, f := range fresh {
		wantExists(t, st, f, false, "after a cancelled MarkEach")
	}

	expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel2()
	statuses, errs = b.ClaimEach(expired, newClaims(fresh...), lease)
	wantClaimEach(t, statuses, errs, make([]dedupe.Status, 2), []error{context.DeadlineExceeded, context.DeadlineExceeded})
	claimEach(t, st, newClaims(fresh...), lease, dedupe.Claimed, dedupe.Claimed)
}

// testEachClosed calls every method on a closed store: every item fails
// with ErrClosed.
func testEachClosed(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b, ctx := batchOf(st), context.Background()
	held := claim(t, st, s.key(), s.d(10*time.Minute), dedupe.Claimed)
	closeStore(t, st)
	claims := []dedupe.Claim{dedupe.NewClaim(s.key()), held, dedupe.NewClaim(s.key())}
	closed := []error{dedupe.ErrClosed, dedupe.ErrClosed, dedupe.ErrClosed}
	statuses, errs := b.ClaimEach(ctx, claims, time.Hour)
	wantClaimEach(t, statuses, errs, make([]dedupe.Status, len(claims)), closed)
	wantEach(t, "ExtendEach after Close", b.ExtendEach(ctx, claims, time.Hour), closed...)
	wantEach(t, "ReleaseEach after Close", b.ReleaseEach(ctx, claims), closed...)
	keys := []dedupe.Key{s.key(), held.Key, s.key()}
	wantEach(t, "MarkEach after Close", b.MarkEach(ctx, keys, [][]byte{nil, []byte("r"), {}}, time.Hour), closed...)
	wantEach(t, "MarkEach without results after Close", b.MarkEach(ctx, keys, nil, time.Hour), closed...)
}

// testEachAgrees mixes batch calls and one-key calls on the same keys: a
// claim or mark made by either is seen by the other.
func testEachAgrees(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b, ctx := batchOf(st), context.Background()
	lease, ttl := s.d(10*time.Minute), s.d(10*time.Minute)
	batch := newClaims(s.key(), s.key())
	claimEach(t, st, batch, lease, dedupe.Claimed, dedupe.Claimed)
	claim(t, st, batch[0].Key, lease, dedupe.InFlight)
	wantExists(t, st, batch[0].Key, false, "while claimed by ClaimEach")
	wantResult(t, st, batch[0].Key, nil, false, "while claimed by ClaimEach")
	if err := st.Extend(ctx, batch[0], lease); err != nil {
		t.Fatalf("Extend of a claim ClaimEach took: %v", err)
	}
	claimAs(t, st, batch[0], lease, dedupe.Claimed)
	if err := st.Release(ctx, batch[1]); err != nil {
		t.Fatalf("Release of a claim ClaimEach took: %v", err)
	}
	claim(t, st, batch[1].Key, lease, dedupe.Claimed)

	one := claim(t, st, s.key(), lease, dedupe.Claimed)
	claimEach(t, st, []dedupe.Claim{dedupe.NewClaim(one.Key), one}, lease, dedupe.InFlight, dedupe.Claimed)
	wantEach(t, "ExtendEach of a claim Claim took", b.ExtendEach(ctx, []dedupe.Claim{one}, lease), nil)
	wantEach(t, "ReleaseEach of a claim Claim took", b.ReleaseEach(ctx, []dedupe.Claim{one}), nil)
	wantErr(t, st.Release(ctx, one), dedupe.ErrNotOwner, "Release of a claim ReleaseEach dropped")
	claim(t, st, one.Key, lease, dedupe.Claimed)

	wantEach(t, "MarkEach", b.MarkEach(ctx, []dedupe.Key{batch[0].Key}, [][]byte{[]byte("batch")}, ttl), nil)
	wantExists(t, st, batch[0].Key, true, "after MarkEach")
	wantResult(t, st, batch[0].Key, []byte("batch"), true, "after MarkEach")
	claim(t, st, batch[0].Key, lease, dedupe.Duplicate)
	wantErr(t, st.Release(ctx, batch[0]), dedupe.ErrNotOwner, "Release of a claim MarkEach replaced")

	single := s.key()
	markResult(t, st, single, []byte("one"), ttl)
	claimEach(t, st, newClaims(single), lease, dedupe.Duplicate)
	wantEach(t, "MarkEach over MarkResult", b.MarkEach(ctx, []dedupe.Key{single}, nil, ttl), nil)
	wantResult(t, st, single, nil, true, "after MarkEach without a result over MarkResult")
}

// testEachExclusive races batches over the same keys, in different orders,
// against one-key claims of them: each key is claimed exactly once.
func testEachExclusive(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b := batchOf(st)
	const keys, racers = 64, 8 // an hour, unscaled: nothing here may expire
	ks := make([]dedupe.Key, keys)
	for i := range ks {
		ks[i] = s.key()
	}
	var mu sync.Mutex
	claimed := make([]int, keys)
	var failures []error
	record := func(i int, status dedupe.Status, err error) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil:
			failures = append(failures, fmt.Errorf("claim of %s: %w", ks[i], err))
		case status == dedupe.Claimed:
			claimed[i]++
		case status != dedupe.InFlight:
			failures = append(failures, fmt.Errorf("claim of %s = %v, want claimed or in flight", ks[i], status))
		}
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	for g := range racers {
		wg.Go(func() {
			<-start
			claims := make([]dedupe.Claim, keys)
			for j := range claims {
				claims[j] = dedupe.NewClaim(ks[(j+g*keys/racers)%keys]) // each racer its own order
			}
			statuses, errs := b.ClaimEach(context.Background(), claims, time.Hour)
			if len(statuses) != keys || len(errs) != keys {
				record(0, 0, fmt.Errorf("dedupe: ClaimEach of %d claims returned %d statuses, %d errors", keys, len(statuses), len(errs)))
				return
			}
			for j := range claims {
				record((j+g*keys/racers)%keys, statuses[j], errs[j])
			}
		})
		wg.Go(func() {
			<-start
			i := (g * 5) % keys
			status, err := st.Claim(context.Background(), dedupe.NewClaim(ks[i]), time.Hour)
			record(i, status, err)
		})
	}
	close(start)
	wg.Wait()
	for _, err := range failures {
		t.Error(err)
	}
	for i, n := range claimed {
		if n != 1 {
			t.Errorf("%s claimed %d times by racing ClaimEach and Claim calls, want exactly once", ks[i], n)
		}
	}
}
