package dedupetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The tests of the optional capabilities declared beside [dedupe.Store]: Run
// adds the group of each interface that a store of Config.New implements.
// [dedupe.TxStore] has RunTx, in tx.go.

// capabilities are the optional interfaces that Run finds by assertion, each
// with its group.
var capabilities = []struct {
	name string
	has  func(dedupe.Store) bool
	test func(*testing.T, *suite)
}{
	{"Lister", implements[dedupe.Lister], testLister},
	{"BulkMarker", implements[dedupe.BulkMarker], testBulkMarker},
	{"BatchStore", implements[dedupe.BatchStore], testBatchStore},
	{"Counter", implements[dedupe.Counter], testCounter},
	{"Sizer", implements[dedupe.Sizer], testSizer},
	{"MinLeaser", implements[dedupe.MinLeaser], testMinLeaser},
	{"Evicter", implements[dedupe.Evicter], testEvicter},
	{"Forgetter", implements[dedupe.Forgetter], testForgetter},
}

func implements[I any](st dedupe.Store) bool {
	_, ok := st.(I)
	return ok
}

// capabilityGroups opens a store with cfg.New, asks it which optional
// interfaces it implements, logs them, and returns their groups.
func capabilityGroups(t *testing.T, cfg Config) []group {
	t.Helper()
	var o Options
	if !cfg.RealTime {
		o.Now = NewClock(time.Date(2026, 11, 29, 20, 30, 0, 0, time.UTC)).Now
	}
	st := cfg.New(t, o)
	if st == nil {
		t.Fatal("dedupetest: Config.New returned nil")
	}
	defer st.Close()
	var groups []group
	var has, lacks []string
	for _, c := range capabilities {
		if c.has(st) {
			groups = append(groups, group{c.name, c.test})
			has = append(has, c.name)
		} else {
			lacks = append(lacks, c.name)
		}
	}
	t.Logf("dedupetest: %s store: capability groups [%s]; not implemented [%s]",
		st.Backend(), strings.Join(has, " "), strings.Join(lacks, " "))
	return groups
}

// The keys of a store's walk: text forms that share prefixes, with ':' in
// the message id and bytes on either side of it, so that a cursor between
// two of them must be compared as the store orders them.
func (s *suite) listedKeys() []dedupe.Key {
	id := s.id
	keys := []dedupe.Key{
		{Channel: "ch", MessageID: id + ":"},
		{Channel: "ch", MessageID: id + ":a:b"},
		{Channel: "ch", MessageID: id + "9"},
		{Channel: "ch", MessageID: id + ";"},
		{Channel: "ch", MessageID: id + "é"},
		{Channel: "ch-", MessageID: id},
		{Channel: "chx", MessageID: id},
		{Channel: "c", MessageID: "h:" + id},
	}
	for i := range 12 {
		keys = append(keys, dedupe.Key{Channel: "ch", MessageID: fmt.Sprintf("%s-%02d", id, i)})
	}
	return keys
}

// testLister writes marks of several expiries, claims and an expired mark to
// a store of its own, and walks it with ListMarks in pages of 1, 3 and 1000
// marks, and resumed half way: every mark comes with its expiry, split at the
// first ':' as it was written, and nothing else does. An expired mark not yet
// deleted may come, with its past expiry; a mark that never expires comes
// with the zero time.
// skipRefused skips the test if l, a Lister as st's type is, refuses to
// walk st's marks in its configuration: ListMarks fails with an error
// wrapping [errors.ErrUnsupported].
func skipRefused(t *testing.T, st dedupe.Store, l dedupe.Lister) {
	t.Helper()
	_, err := l.ListMarks(context.Background(), "", 1, func(dedupe.Key, time.Time) {})
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("dedupetest: %s store refuses ListMarks as configured: %v", st.Backend(), err)
	}
}

func testLister(t *testing.T, s *suite) {
	st := s.open(t, Options{Isolated: true})
	l := st.(dedupe.Lister)
	skipRefused(t, st, l)
	if got := walkMarks(t, s, l, "", 10, 0); len(got.marks) != 0 {
		t.Fatalf("ListMarks of an empty store yielded %d marks: %v", len(got.marks), got.marks)
	}

	want := map[dedupe.Key]time.Time{}
	for i, k := range s.listedKeys() {
		ttl := time.Hour + time.Duration(i)*time.Minute // unscaled: nothing here expires
		at := s.now()
		if i%4 == 1 {
			markResult(t, st, k, []byte("listed with its result"), ttl)
		} else {
			mark(t, st, k, ttl)
		}
		want[k] = at.Add(ttl)
	}
	remarked := s.key() // a claim, then a mark
	claim(t, st, remarked, time.Hour, dedupe.Claimed)
	at := s.now()
	mark(t, st, remarked, 2*time.Hour)
	want[remarked] = at.Add(2 * time.Hour)
	if s.cfg.MarkForever != nil {
		forever := s.key()
		s.cfg.MarkForever(t, st, forever)
		want[forever] = time.Time{}
	}
	claim(t, st, s.key(), time.Hour, dedupe.Claimed)
	released := claim(t, st, s.key(), time.Hour, dedupe.Claimed)
	if err := st.Release(context.Background(), released); err != nil {
		t.Fatalf("Release: %v", err)
	}
	expired := s.key()
	mark(t, st, expired, s.d(time.Minute))
	s.wait(4 * time.Minute)

	pages := 0 // of the walk in pages of 3
	for _, limit := range []int{1, 3, 1000} {
		start := s.now()
		got := walkMarks(t, s, l, "", limit, 0)
		checkListed(t, s, fmt.Sprintf("a walk in pages of %d", limit), got.marks, want, expired, start)
		t.Logf("dedupetest: a walk with limit %d: %d pages, the largest of %d marks", limit, got.pages, got.largest)
		if limit == 3 {
			pages = got.pages
		}
	}

	// Stopped half way and resumed from its cursor, the walk yields the rest.
	start := s.now()
	first := walkMarks(t, s, l, "", 3, max(1, pages/2))
	if first.next == "" {
		t.Fatalf("a walk of %d marks in pages of 3 ended after %d pages", len(want), first.pages)
	}
	rest := walkMarks(t, s, l, first.next, 3, 0)
	for k, exp := range rest.marks {
		first.marks[k] = exp
	}
	checkListed(t, s, fmt.Sprintf("a walk resumed from %q", first.next), first.marks, want, expired, start)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := l.ListMarks(ctx, "", 10, func(dedupe.Key, time.Time) {})
	wantErr(t, err, context.Canceled, "ListMarks with a cancelled context")
	closeStore(t, st)
	_, err = l.ListMarks(context.Background(), "", 10, func(dedupe.Key, time.Time) {})
	wantErr(t, err, dedupe.ErrClosed, "ListMarks after Close")
}

// listing is what walkMarks found.
type listing struct {
	marks   map[dedupe.Key]time.Time
	pages   int
	largest int    // the most marks a page yielded
	next    string // the cursor to resume from; "" at the end of the walk
}

// walkMarks reads pages of l from cursor, up to limit marks each, until the
// walk ends or after stop pages (0: no stop). It fails t on an error, a key
// yielded twice with two expiries, or a walk that goes on for ever. A page
// may yield more than limit marks (a step of Redis's SCAN finds what it
// finds), so it records the largest.
func walkMarks(t *testing.T, s *suite, l dedupe.Lister, cursor string, limit, stop int) listing {
	t.Helper()
	got := listing{marks: map[dedupe.Key]time.Time{}, next: cursor}
	const endless = 1000 // pages: more than any walk here needs, however short its pages
	for {
		n := 0
		next, err := l.ListMarks(context.Background(), got.next, limit, func(k dedupe.Key, exp time.Time) {
			n++
			if prev, again := got.marks[k]; again && !near(prev, exp, s.tolerance()) {
				t.Errorf("ListMarks yielded %s twice, expiring at %v and at %v", k, prev, exp)
			}
			got.marks[k] = exp
		})
		if err != nil {
			t.Fatalf("ListMarks(%q, %d): %v", got.next, limit, err)
		}
		got.pages++
		got.largest = max(got.largest, n)
		if next == got.next && next != "" {
			t.Fatalf("ListMarks(%q, %d) returned its own cursor", got.next, limit)
		}
		got.next = next
		if next == "" || got.pages == stop {
			return got
		}
		if got.pages == endless {
			t.Fatalf("a walk in pages of %d still goes on after %d pages", limit, endless)
		}
	}
}

// checkListed fails t unless got holds every key of want, with its expiry,
// and nothing else but expired, with an expiry before start, the time the
// walk began.
func checkListed(t *testing.T, s *suite, what string, got, want map[dedupe.Key]time.Time, expired dedupe.Key, start time.Time) {
	t.Helper()
	for k, exp := range want {
		g, ok := got[k]
		switch {
		case !ok:
			t.Errorf("%s: %s not listed", what, k)
		case exp.IsZero() && !g.IsZero():
			t.Errorf("%s: %s, which never expires, listed with expiry %v", what, k, g)
		case !near(g, exp, s.tolerance()):
			t.Errorf("%s: %s listed with expiry %v, want %v (±%v)", what, k, g, exp, s.tolerance())
		}
	}
	for k, exp := range got {
		switch _, ok := want[k]; {
		case ok:
		case k == expired:
			if exp.IsZero() || exp.After(start) {
				t.Errorf("%s: the expired mark %s listed with expiry %v, after the walk began at %v", what, k, exp, start)
			}
		default:
			t.Errorf("%s: %s listed, which the store holds no mark of (a claim, or a key split wrong)", what, k)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
}

// near reports whether a and b are within tol of each other, both zero, or
// neither.
func near(a, b time.Time, tol time.Duration) bool {
	if a.IsZero() || b.IsZero() {
		return a.IsZero() == b.IsZero()
	}
	d := a.Sub(b)
	return -tol <= d && d <= tol
}

// closeStore closes st, failing t on an error.
func closeStore(t *testing.T, st dedupe.Store) {
	t.Helper()
	if err := st.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// testBulkMarker writes a batch of marks with MarkUntil over keys in every
// state: absent, released, claimed, marked for less and for longer than the
// batch, marked with a result, marked with a result that expired, and a
// mark that never expires. It checks the count of live marks, the expiry
// each key then has (each its own, or the live mark's if later), the results
// kept and dropped, the claim replaced, and that the batch written again
// changes nothing.
func testBulkMarker(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	b := st.(dedupe.BulkMarker)
	ctx := context.Background()

	stale := s.key() // its mark and result expire before the batch
	markResult(t, st, stale, []byte("stale"), s.d(time.Minute))
	s.wait(4 * time.Minute) // 4

	fresh, later, released := s.key(), s.key(), s.key()
	shorter, longer, withResult := s.key(), s.key(), s.key()
	mark(t, st, shorter, s.d(3*time.Minute)) // to 7
	mark(t, st, longer, s.d(30*time.Minute)) // to 34
	markResult(t, st, withResult, []byte("kept"), s.d(3*time.Minute))
	held := claim(t, st, s.key(), s.d(30*time.Minute), dedupe.Claimed)
	r := claim(t, st, released, s.d(30*time.Minute), dedupe.Claimed)
	if err := st.Release(ctx, r); err != nil {
		t.Fatalf("Release: %v", err)
	}
	keys := []dedupe.Key{fresh, later, released, held.Key, shorter, longer, withResult, stale}
	until, untilLater := s.now().Add(s.d(10*time.Minute)), s.now().Add(s.d(20*time.Minute)) // 14, 24
	expires := []time.Time{until, untilLater, until, until, until, until, until, until}
	wantPresent := 3 // shorter, longer, withResult
	var forever dedupe.Key
	if s.cfg.MarkForever != nil {
		forever = s.key()
		s.cfg.MarkForever(t, st, forever)
		keys, expires = append(keys, forever), append(expires, until)
		wantPresent++
	}

	present, err := b.MarkUntil(ctx, keys, expires)
	if err != nil || present != wantPresent {
		t.Fatalf("MarkUntil = %d present, %v; want %d", present, err, wantPresent)
	}
	for _, k := range keys {
		wantExists(t, st, k, true, "after MarkUntil")
	}
	claim(t, st, held.Key, s.d(10*time.Minute), dedupe.Duplicate)
	wantErr(t, st.Release(ctx, held), dedupe.ErrNotOwner, "Release of a claim MarkUntil replaced")
	wantResult(t, st, withResult, []byte("kept"), true, "of a live mark MarkUntil lengthened")
	wantResult(t, st, stale, nil, true, "of an expired mark MarkUntil replaced")
	wantResult(t, st, fresh, nil, true, "of a key MarkUntil marked")

	// Written again, the batch finds every key marked and changes nothing.
	present, err = b.MarkUntil(ctx, keys, expires)
	if err != nil || present != len(keys) {
		t.Fatalf("MarkUntil of the batch again = %d present, %v; want %d", present, err, len(keys))
	}
	wantResult(t, st, withResult, []byte("kept"), true, "after the batch again")

	s.wait(6 * time.Minute) // 10
	wantExists(t, st, shorter, true, "past its own expiry, within the batch's")
	wantResult(t, st, withResult, []byte("kept"), true, "past its own expiry, within the batch's")
	s.wait(7 * time.Minute) // 17
	for _, k := range []dedupe.Key{fresh, released, held.Key, shorter, withResult, stale} {
		wantExists(t, st, k, false, "after the batch's expiry")
	}
	wantExists(t, st, later, true, "within its own later expiry in the batch")
	wantExists(t, st, longer, true, "within the longer expiry it had before the batch")
	if s.cfg.MarkForever != nil {
		wantExists(t, st, forever, true, "a mark that never expires, after the batch's expiry")
	}

	refuseMarkUntil(t, s, st)
}

// refuseMarkUntil checks that MarkUntil refuses a batch with an invalid key,
// a cancelled context, and a closed store, which it closes.
func refuseMarkUntil(t *testing.T, s *suite, st dedupe.Store) {
	t.Helper()
	b := st.(dedupe.BulkMarker)
	ctx := context.Background()
	later := s.now().Add(time.Hour)
	_, err := b.MarkUntil(ctx, []dedupe.Key{s.key(), {Channel: "a:b", MessageID: "1"}}, []time.Time{later, later})
	wantErr(t, err, dedupe.ErrInvalidKey, "MarkUntil with an invalid key")
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = b.MarkUntil(cctx, []dedupe.Key{s.key()}, []time.Time{later})
	wantErr(t, err, context.Canceled, "MarkUntil with a cancelled context")
	closeStore(t, st)
	_, err = b.MarkUntil(ctx, []dedupe.Key{s.key()}, []time.Time{later})
	wantErr(t, err, dedupe.ErrClosed, "MarkUntil after Close")
}

// testCounter writes marks, claims and marks and claims that expire to a
// store of its own, and checks what CountLive counts: the live marks (a
// claim marked over is one, and a mark that never expires), the live claims
// (not a released one), and the earliest and latest expiry of the live marks
// that expire.
func testCounter(t *testing.T, s *suite) {
	st := s.open(t, Options{Isolated: true})
	c := st.(dedupe.Counter)
	wantCount(t, s, c, 0, 0, time.Time{}, time.Time{}, "of an empty store")

	remarked := claim(t, st, s.key(), time.Hour, dedupe.Claimed)
	at := s.now()
	mark(t, st, remarked.Key, 30*time.Minute) // unscaled, as every live one here
	oldest := at.Add(30 * time.Minute)
	for i := range 4 {
		mark(t, st, s.key(), time.Hour+time.Duration(i)*10*time.Minute)
	}
	at = s.now()
	markResult(t, st, s.key(), []byte("counted"), 3*time.Hour)
	newest := at.Add(3 * time.Hour)
	marks := int64(6)
	if s.cfg.MarkForever != nil {
		s.cfg.MarkForever(t, st, s.key())
		marks++
	}
	claim(t, st, s.key(), time.Hour, dedupe.Claimed)
	claim(t, st, s.key(), 2*time.Hour, dedupe.Claimed)
	released := claim(t, st, s.key(), time.Hour, dedupe.Claimed)
	if err := st.Release(context.Background(), released); err != nil {
		t.Fatalf("Release: %v", err)
	}
	mark(t, st, s.key(), s.d(time.Minute))
	claim(t, st, s.key(), s.d(time.Minute), dedupe.Claimed)
	s.wait(4 * time.Minute)
	wantCount(t, s, c, marks, 2, oldest, newest, "after some expired")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, _, _, err := c.CountLive(ctx)
	wantErr(t, err, context.Canceled, "CountLive with a cancelled context")
	closeStore(t, st)
	_, _, _, _, err = c.CountLive(context.Background())
	wantErr(t, err, dedupe.ErrClosed, "CountLive after Close")
}

func wantCount(t *testing.T, s *suite, c dedupe.Counter, marks, claims int64, oldest, newest time.Time, when string) {
	t.Helper()
	m, cl, o, n, err := c.CountLive(context.Background())
	if err != nil {
		t.Fatalf("CountLive %s: %v", when, err)
	}
	if m != marks || cl != claims || !near(o, oldest, s.tolerance()) || !near(n, newest, s.tolerance()) {
		t.Fatalf("CountLive %s = %d marks, %d claims, oldest %v, newest %v; want %d, %d, %v, %v (±%v)",
			when, m, cl, o, n, marks, claims, oldest, newest, s.tolerance())
	}
}

// testSizer writes marks with results and claims to a store of its own, and
// checks that Sizes names at least one table, partition or file, each with
// its bytes.
func testSizer(t *testing.T, s *suite) {
	st := s.open(t, Options{Isolated: true})
	sz := st.(dedupe.Sizer)
	res := bytes.Repeat([]byte("sized "), 200)
	for range 50 {
		markResult(t, st, s.key(), res, time.Hour)
	}
	claim(t, st, s.key(), time.Hour, dedupe.Claimed)
	ctx := context.Background()
	sizes, err := sz.Sizes(ctx)
	if err != nil {
		t.Fatalf("Sizes: %v", err)
	}
	if len(sizes) == 0 {
		t.Fatal("Sizes is empty after 50 marks")
	}
	for name, n := range sizes {
		if name == "" || n <= 0 {
			t.Errorf("Sizes: %q takes %d bytes", name, n)
		}
	}
	var total int64
	for _, n := range sizes {
		total += n
	}
	if kept := int64(50 * len(res)); total < kept {
		t.Errorf("Sizes sum to %d bytes, less than the %d bytes of the results kept", total, kept)
	}
	t.Logf("dedupetest: Sizes: %d names, summing to %d bytes", len(sizes), total)

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = sz.Sizes(cctx)
	wantErr(t, err, context.Canceled, "Sizes with a cancelled context")
	closeStore(t, st)
	_, err = sz.Sizes(ctx)
	wantErr(t, err, dedupe.ErrClosed, "Sizes after Close")
}

// testMinLeaser checks that MinLease is not negative and does not change,
// and that [dedupe.New] over the store warns of a lease shorter than it, and
// of no other.
func testMinLeaser(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	m := st.(dedupe.MinLeaser)
	least := m.MinLease()
	if least < 0 {
		t.Fatalf("MinLease() = %v", least)
	}
	mark(t, st, s.key(), time.Hour)
	claim(t, st, s.key(), time.Hour, dedupe.Claimed)
	if again := m.MinLease(); again != least {
		t.Fatalf("MinLease() = %v, then %v", least, again)
	}
	t.Logf("dedupetest: MinLease %v", least)
	for _, lease := range []time.Duration{time.Millisecond, least / 2, least - time.Millisecond, least, least + time.Minute} {
		if lease <= 0 {
			continue // the Deduper's default lease
		}
		want := lease < least
		var buf bytes.Buffer
		d := dedupe.New(st, dedupe.WithLogger(slog.New(slog.NewTextHandler(&buf, nil))), dedupe.WithLease(lease))
		if err := d.Close(); err != nil {
			t.Fatalf("Deduper.Close: %v", err)
		}
		out := buf.String()
		if got := strings.Contains(out, "level=WARN") && strings.Contains(out, "lease"); got != want {
			t.Errorf("dedupe.New with a lease of %v over a store of MinLease %v: warned %v, want %v; log: %q", lease, least, got, want, out)
		}
	}
}
