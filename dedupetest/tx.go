package dedupetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The tests of [dedupe.TxStore]: DoTx commits the caller's effects with the
// key's mark, or neither.

// TxConfig describes a store that implements [dedupe.TxStore] for the
// transaction type Tx of its database, and a table of effects in that
// database, for [RunTx].
type TxConfig[Tx any] struct {
	// New returns a new store, which must implement [dedupe.TxStore][Tx].
	// RunTx closes it. It asks for the store's defaults (zero [Options]):
	// its checks need no clock and keys are unique to each run, so the stores
	// of a run may share a namespace.
	New func(t *testing.T, o Options) dedupe.Store

	// Effect writes one effect of key in tx: a row of a table of effects in
	// the store's database.
	Effect func(ctx context.Context, tx Tx, key dedupe.Key) error

	// Effects returns the number of committed effects of key in the database
	// of st, a store New returned.
	Effects func(t *testing.T, st dedupe.Store, key dedupe.Key) int
}

// RunTx runs the tests of [dedupe.TxStore] as subtests of t. They check that
// DoTx runs fn once and commits its effect with the mark; that a copy gets
// [dedupe.ErrDuplicate], and a key claimed by another token
// [dedupe.ErrInFlight], without running fn; that fn's error or panic rolls
// the effect and the mark back, the panic propagating, and leaves the key to
// a later DoTx; that a Claim beside an open DoTx never takes its key; that of
// concurrent copies one runs; and that invalid keys, cancelled contexts and
// closed stores are refused without running fn. For a store that is also a
// [reply.TxStore][Tx] it adds the groups MarkResultTx (a mark and result
// written in the caller's transaction: visible on commit, gone on rollback,
// replacing a mark, clearing a claim, refusing a result over the limit) and
// IntendTx (replies recorded with the caller's effect, sent by Flush after
// the commit, once; nothing after a rollback).
//
// [Run] cannot find this capability, whose interface is generic in the
// database's transaction type: a store that implements it calls RunTx beside
// Run.
func RunTx[Tx any](t *testing.T, cfg TxConfig[Tx]) {
	if cfg.New == nil || cfg.Effect == nil || cfg.Effects == nil {
		t.Fatal("dedupetest: TxConfig needs New, Effect and Effects")
	}
	groups := []txGroup[Tx]{
		{"Commit", testTxCommit[Tx]},
		{"ErrorRollsBack", testTxError[Tx]},
		{"PanicRollsBack", testTxPanic[Tx]},
		{"Claimed", testTxClaimed[Tx]},
		{"BesideClaim", testTxBesideClaim[Tx]},
		{"Concurrent", testTxConcurrent[Tx]},
		{"Inputs", testTxInputs[Tx]},
	}
	for _, tc := range append(groups, replyTxGroups(t, cfg)...) {
		t.Run(tc.name, func(t *testing.T) {
			tc.f(t, &txSuite[Tx]{cfg: cfg, id: randomID(t)})
		})
	}
}

// txGroup is a subtest of RunTx.
type txGroup[Tx any] struct {
	name string
	f    func(*testing.T, *txSuite[Tx])
}

// txSuite is the state of one subtest of RunTx.
type txSuite[Tx any] struct {
	cfg TxConfig[Tx]
	id  string // unique to the subtest, in every key
	n   int
}

// open creates a store, closed at the end of the test.
func (x *txSuite[Tx]) open(t *testing.T) (dedupe.Store, dedupe.TxStore[Tx]) {
	t.Helper()
	st := x.cfg.New(t, Options{})
	if st == nil {
		t.Fatal("dedupetest: TxConfig.New returned nil")
	}
	t.Cleanup(func() { _ = st.Close() })
	ts, ok := st.(dedupe.TxStore[Tx])
	if !ok {
		var tx Tx
		t.Fatalf("dedupetest: %T does not implement dedupe.TxStore[%T]", st, tx)
	}
	return st, ts
}

// key returns a new key unique to this run.
func (x *txSuite[Tx]) key() dedupe.Key {
	x.n++
	return dedupe.Key{Channel: "conformance-tx", MessageID: fmt.Sprintf("%s-%d", x.id, x.n)}
}

// write returns a fn for DoTx that counts its runs, writes key's effect and
// returns err.
func (x *txSuite[Tx]) write(runs *atomic.Int32, key dedupe.Key, err error) func(context.Context, Tx) error {
	return func(ctx context.Context, tx Tx) error {
		runs.Add(1)
		if werr := x.cfg.Effect(ctx, tx, key); werr != nil {
			return fmt.Errorf("dedupetest: Effect(%s): %w", key, werr)
		}
		return err
	}
}

// wantEffects checks the number of committed effects of k.
// commitOnce runs a DoTx of k that must commit, when, and checks that k then
// has one effect.
func (x *txSuite[Tx]) commitOnce(t *testing.T, ctx context.Context, st dedupe.Store, ts dedupe.TxStore[Tx], k dedupe.Key, when string) {
	t.Helper()
	var runs atomic.Int32
	if err := ts.DoTx(ctx, k, x.write(&runs, k, nil)); err != nil {
		t.Fatalf("DoTx %s: %v", when, err)
	}
	x.wantEffects(t, st, k, 1, "after DoTx "+when)
}

func (x *txSuite[Tx]) wantEffects(t *testing.T, st dedupe.Store, k dedupe.Key, want int, when string) {
	t.Helper()
	if got := x.cfg.Effects(t, st, k); got != want {
		t.Fatalf("%d effects of %s %s, want %d", got, k, when, want)
	}
}

// wantRuns checks how many times fn ran.
func wantRuns(t *testing.T, runs *atomic.Int32, want int32, when string) {
	t.Helper()
	if got := runs.Load(); got != want {
		t.Fatalf("fn ran %d times %s, want %d", got, when, want)
	}
}

// testTxCommit: fn runs once, its effect commits with the mark, and a copy
// gets ErrDuplicate without running fn.
func testTxCommit[Tx any](t *testing.T, x *txSuite[Tx]) {
	st, ts := x.open(t)
	ctx := context.Background()
	k := x.key()
	var runs atomic.Int32
	if err := ts.DoTx(ctx, k, x.write(&runs, k, nil)); err != nil {
		t.Fatalf("DoTx: %v", err)
	}
	wantRuns(t, &runs, 1, "in DoTx")
	x.wantEffects(t, st, k, 1, "after DoTx")
	wantExists(t, st, k, true, "after DoTx")
	wantResult(t, st, k, nil, true, "after DoTx")
	claim(t, st, k, time.Hour, dedupe.Duplicate)

	wantErr(t, ts.DoTx(ctx, k, x.write(&runs, k, nil)), dedupe.ErrDuplicate, "DoTx of a copy")
	wantRuns(t, &runs, 1, "after DoTx of a copy")
	x.wantEffects(t, st, k, 1, "after DoTx of a copy")
}

// testTxError: fn's error is returned and rolls its effect and the mark
// back; a later DoTx of the key runs.
func testTxError[Tx any](t *testing.T, x *txSuite[Tx]) {
	st, ts := x.open(t)
	ctx := context.Background()
	k := x.key()
	var runs atomic.Int32
	errFail := errors.New("handler failed")
	if err := ts.DoTx(ctx, k, x.write(&runs, k, errFail)); !errors.Is(err, errFail) {
		t.Fatalf("DoTx with a failing fn = %v, want its error", err)
	}
	x.wantEffects(t, st, k, 0, "after a failed DoTx")
	wantExists(t, st, k, false, "after a failed DoTx")
	if err := ts.DoTx(ctx, k, x.write(&runs, k, nil)); err != nil {
		t.Fatalf("DoTx after a failed one: %v", err)
	}
	wantRuns(t, &runs, 2, "in a failed DoTx and the next")
	x.wantEffects(t, st, k, 1, "after a failed DoTx and the next")
	wantExists(t, st, k, true, "after a failed DoTx and the next")
}

// testTxPanic: fn's panic propagates from DoTx, after rolling its effect and
// the mark back; the store is not left locked, and a later DoTx runs.
func testTxPanic[Tx any](t *testing.T, x *txSuite[Tx]) {
	st, ts := x.open(t)
	ctx := context.Background()
	k := x.key()
	var runs atomic.Int32
	type handlerPanic struct{}
	var recovered any
	var err error
	func() {
		defer func() { recovered = recover() }()
		err = ts.DoTx(ctx, k, func(ctx context.Context, tx Tx) error {
			if err := x.write(&runs, k, nil)(ctx, tx); err != nil {
				return err
			}
			panic(handlerPanic{})
		})
	}()
	if _, ok := recovered.(handlerPanic); !ok {
		t.Fatalf("DoTx with a panicking fn: recovered %v, returned %v; want fn's panic", recovered, err)
	}
	x.wantEffects(t, st, k, 0, "after a panic in fn")
	wantExists(t, st, k, false, "after a panic in fn")
	// A transaction left open would hold the key, or the database's lock:
	// the next DoTx would wait for it.
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	x.commitOnce(t, ctx, st, ts, k, "after a panic in fn")
}

// testTxClaimed: a key claimed by another token gets ErrInFlight without
// running fn, and leaves the claim alone; once it is released, DoTx runs.
func testTxClaimed[Tx any](t *testing.T, x *txSuite[Tx]) {
	st, ts := x.open(t)
	ctx := context.Background()
	k := x.key()
	c := claim(t, st, k, time.Hour, dedupe.Claimed)
	var runs atomic.Int32
	wantErr(t, ts.DoTx(ctx, k, x.write(&runs, k, nil)), dedupe.ErrInFlight, "DoTx of a claimed key")
	wantRuns(t, &runs, 0, "for a claimed key")
	x.wantEffects(t, st, k, 0, "after DoTx of a claimed key")
	claim(t, st, k, time.Hour, dedupe.InFlight)
	if err := st.Release(ctx, c); err != nil {
		t.Fatalf("Release after DoTx of the claimed key: %v", err)
	}
	x.commitOnce(t, ctx, st, ts, k, "after the claim's release")
}

// testTxBesideClaim: while fn runs, the key is neither claimable nor
// marked; once DoTx commits, a claim finds it marked.
func testTxBesideClaim[Tx any](t *testing.T, x *txSuite[Tx]) {
	st, ts := x.open(t)
	ctx := context.Background()
	k := x.key()
	inTx, commit := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- ts.DoTx(ctx, k, func(ctx context.Context, tx Tx) error {
			err := x.cfg.Effect(ctx, tx, k)
			close(inTx)
			<-commit
			return err
		})
	}()
	select {
	case <-inTx:
	case err := <-done:
		t.Fatalf("DoTx returned %v before running fn", err)
	}
	type answer struct {
		status dedupe.Status
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		status, err := st.Claim(ctx, dedupe.NewClaim(k), time.Hour)
		answered <- answer{status, err}
	}()
	var early *answer
	select {
	case a := <-answered: // a store may answer at once, or wait for the transaction
		early = &a
	case <-time.After(100 * time.Millisecond):
	}
	close(commit)
	if err := <-done; err != nil {
		t.Fatalf("DoTx: %v", err)
	}
	a := early
	if a == nil {
		late := <-answered
		a = &late
		t.Logf("dedupetest: a Claim beside an open DoTx waited for its commit: %v", a.status)
	} else {
		t.Logf("dedupetest: a Claim beside an open DoTx answered at once: %v", a.status)
	}
	switch {
	case a.err != nil:
		t.Fatalf("Claim beside an open DoTx: %v", a.err)
	case early != nil && a.status != dedupe.InFlight:
		t.Fatalf("Claim beside an open DoTx answered %v before it committed, want in flight", a.status)
	case a.status == dedupe.Claimed:
		t.Fatal("Claim beside an open DoTx claimed its key")
	}
	claim(t, st, k, time.Hour, dedupe.Duplicate)
	x.wantEffects(t, st, k, 1, "after DoTx beside a Claim")
}

// testTxConcurrent: of concurrent DoTx calls of one key, one runs fn; the
// others get ErrDuplicate, or ErrInFlight while it runs.
func testTxConcurrent[Tx any](t *testing.T, x *txSuite[Tx]) {
	st, ts := x.open(t)
	const keys, copies = 4, 8
	ks := make([]dedupe.Key, keys)
	runs := make([]atomic.Int32, keys)
	for i := range ks {
		ks[i] = x.key()
	}
	var wg sync.WaitGroup
	errs := make(chan error, keys*copies)
	for i, k := range ks {
		for range copies {
			wg.Go(func() {
				err := ts.DoTx(context.Background(), k, x.write(&runs[i], k, nil))
				if err != nil && !errors.Is(err, dedupe.ErrDuplicate) && !errors.Is(err, dedupe.ErrInFlight) {
					errs <- fmt.Errorf("DoTx(%s): %w", k, err)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i, k := range ks {
		wantRuns(t, &runs[i], 1, fmt.Sprintf("for %d concurrent copies of %s", copies, k))
		x.wantEffects(t, st, k, 1, "after concurrent copies")
	}
}

// testTxInputs: invalid keys, a cancelled context and a closed store are
// refused without running fn.
func testTxInputs[Tx any](t *testing.T, x *txSuite[Tx]) {
	st, ts := x.open(t)
	ctx := context.Background()
	var runs atomic.Int32
	for _, k := range invalidKeys() {
		wantErr(t, ts.DoTx(ctx, k, x.write(&runs, k, nil)), dedupe.ErrInvalidKey, fmt.Sprintf("DoTx(%q)", k))
	}
	wantRuns(t, &runs, 0, "for invalid keys")

	k := x.key()
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	wantErr(t, ts.DoTx(cctx, k, x.write(&runs, k, nil)), context.Canceled, "DoTx with a cancelled context")
	wantRuns(t, &runs, 0, "with a cancelled context")
	wantExists(t, st, k, false, "after DoTx with a cancelled context")
	if err := ts.DoTx(ctx, k, x.write(&runs, k, nil)); err != nil {
		t.Fatalf("DoTx after a cancelled one: %v", err)
	}
	x.wantEffects(t, st, k, 1, "after a cancelled DoTx and the next")

	closeStore(t, st)
	k = x.key()
	wantErr(t, ts.DoTx(ctx, k, x.write(&runs, k, nil)), dedupe.ErrClosed, "DoTx after Close")
	wantRuns(t, &runs, 1, "after Close")
}
