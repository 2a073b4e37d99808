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
	"github.com/gatewaykit/dedupe/reply"
)

// The tests of package reply on a store: its records live in any
// [dedupe.Store], as results of marks, and its lock is a claim. Run runs
// them on every store (the group Replies); RunTx runs those of
// [reply.IntendTx] on a store that is a [reply.TxStore].

// errReplyLost is the error of a test platform's send whose answer was lost.
var errReplyLost = errors.New("dedupetest: platform: answer lost")

// replyPlatform is a chat platform for the tests of package reply: it
// counts the messages a user sees, per reply, and drops a repeat of a token
// it accepted (always: the tests send again within any window) when honour
// is set.
type replyPlatform struct {
	honour bool
	mu     sync.Mutex
	lose   int            // the answers of the next lose accepted sends are lost
	refuse int            // the next refuse sends are refused (NotSent)
	seen   map[string]int // "{key}#{slot}" → messages the user saw
	tokens map[string]string
	sends  int
}

func newReplyPlatform(honour bool) *replyPlatform {
	return &replyPlatform{honour: honour, seen: map[string]int{}, tokens: map[string]string{}}
}

func (p *replyPlatform) send(ctx context.Context, m reply.Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sends++
	if p.refuse > 0 {
		p.refuse--
		return "", reply.NotSent(errors.New("dedupetest: platform: 400"))
	}
	slot := fmt.Sprintf("%s#%d", m.Key, m.Slot)
	id, dup := p.tokens[m.Token]
	if !p.honour || m.Token == "" || !dup {
		p.seen[slot]++
		id = fmt.Sprintf("%s/%d", slot, p.seen[slot])
		p.tokens[m.Token] = id
	}
	if p.lose > 0 {
		p.lose--
		return "", errReplyLost
	}
	return id, nil
}

// saw returns how many messages of reply slot of k the user saw.
func (p *replyPlatform) saw(k dedupe.Key, slot int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[fmt.Sprintf("%s#%d", k, slot)]
}

// replyPreset is a platform whose token the test platform honours, with a
// window that a real-time run does not outlast.
var replyPreset = reply.Platform{Name: "conformance", Policy: reply.Native, Window: time.Hour, Token: reply.UUID}

// sender returns a Sender on st for p, on the suite's clock.
func (s *suite) sender(st dedupe.Store, p reply.Platform, opts ...reply.Option) *reply.Sender {
	return reply.New(st, p, append([]reply.Option{reply.WithClock(s.now)}, opts...)...)
}

// body returns a compose that returns text.
func body(text string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return []byte(text), nil }
}

// wantReplyErr checks that err matches target and is prefixed "reply: ".
func wantReplyErr(t *testing.T, err, target error, what string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: error %v, want %v", what, err, target)
	}
	if !strings.HasPrefix(err.Error(), "reply: ") {
		t.Fatalf("%s: error %q is not prefixed with the package name", what, err)
	}
}

// testReplies runs the tests of package reply on the store.
func testReplies(t *testing.T, s *suite) {
	for _, tc := range []struct {
		name string
		f    func(*testing.T, *suite)
	}{
		{"SendOnce", testReplySendOnce},
		{"UnknownOutcome", testReplyUnknown},
		{"NotSent", testReplyNotSent},
		{"Concurrent", testReplyConcurrent},
		{"SlotsAndFlush", testReplySlots},
		{"TTL", testReplyTTL},
		{"BadRecord", testReplyBadRecord},
		{"Closed", testReplyClosed},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.f(t, s) })
	}
}

// testReplySendOnce: the first Send sends and records; a later one, by
// another Sender on the same store, finds the record and does not send.
func testReplySendOnce(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	p, k, ctx := newReplyPlatform(true), s.key(), context.Background()
	r, err := s.sender(st, replyPreset).Send(ctx, k, 0, body("hello"), p.send)
	if err != nil || !r.Sent || r.Attempts != 1 || r.ID == "" || r.Token != reply.UUID(k, 0) {
		t.Fatalf("first Send = %+v, %v; want sent once, with an id and the slot's token", r, err)
	}
	again, err := s.sender(st, replyPreset).Send(ctx, k, 0, body("hello again"), p.send)
	if err != nil || again.Sent || again.ID != r.ID || again.Attempts != 1 {
		t.Fatalf("Send after a recorded send = %+v, %v; want the first's receipt, not sent", again, err)
	}
	if p.sends != 1 || p.saw(k, 0) != 1 {
		t.Fatalf("the platform got %d sends and showed %d messages, want 1 and 1", p.sends, p.saw(k, 0))
	}
}

// testReplyUnknown: after a send whose platform accepted it and whose answer
// was lost, a Send under each policy does what the policy says.
func testReplyUnknown(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		policy reply.Policy
		seen   int
		lost   bool
	}{{reply.Native, 1, false}, {reply.AtMostOnce, 1, true}, {reply.AtLeastOnce, 2, false}} {
		p, k := newReplyPlatform(tc.policy == reply.Native), s.key() // AtLeastOnce is for a platform without tokens
		snd := s.sender(st, replyPreset, reply.WithPolicy(tc.policy))
		p.lose = 1
		if _, err := snd.Send(ctx, k, 0, body("answer"), p.send); !errors.Is(err, errReplyLost) {
			t.Fatalf("%v: Send with its answer lost: %v, want the platform's error", tc.policy, err)
		}
		r, err := snd.Send(ctx, k, 0, body("answer"), p.send)
		switch {
		case tc.lost:
			wantReplyErr(t, err, reply.ErrMaybeLost, fmt.Sprintf("%v: Send after an unknown outcome", tc.policy))
		case err != nil || !r.Sent || r.Attempts != 2 || r.MaybeDuplicate != (tc.policy == reply.AtLeastOnce):
			t.Fatalf("%v: Send after an unknown outcome = %+v, %v", tc.policy, r, err)
		}
		if got := p.saw(k, 0); got != tc.seen {
			t.Fatalf("%v: the user saw %d messages, want %d", tc.policy, got, tc.seen)
		}
	}
}

// testReplyNotSent: a send the platform refused is sent again under any
// policy.
func testReplyNotSent(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	ctx := context.Background()
	for _, pol := range []reply.Policy{reply.Native, reply.AtMostOnce, reply.AtLeastOnce} {
		p, k := newReplyPlatform(false), s.key()
		snd := s.sender(st, replyPreset, reply.WithPolicy(pol))
		p.refuse = 1
		if _, err := snd.Send(ctx, k, 0, body("answer"), p.send); !reply.IsNotSent(err) {
			t.Fatalf("%v: a refused Send: %v, want a NotSent error", pol, err)
		}
		r, err := snd.Send(ctx, k, 0, body("answer"), p.send)
		if err != nil || !r.Sent || r.Attempts != 2 || r.MaybeDuplicate || p.saw(k, 0) != 1 {
			t.Fatalf("%v: Send after a refusal = %+v, %v, %d seen; want sent once more", pol, r, err, p.saw(k, 0))
		}
	}
}

// testReplyConcurrent: concurrent Sends of one reply, by Senders sharing the
// store, send it once; the others find it sent or in flight.
func testReplyConcurrent(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	p := newReplyPlatform(false) // no token: a second send would show twice
	const replies, copies = 4, 6
	keys := make([]dedupe.Key, replies)
	for i := range keys {
		keys[i] = s.key()
	}
	var wg sync.WaitGroup
	errs := make(chan error, replies*copies)
	for _, k := range keys {
		for range copies {
			wg.Go(func() {
				_, err := s.sender(st, reply.Telegram).Send(context.Background(), k, 0, body("answer"), p.send)
				if err != nil && !errors.Is(err, dedupe.ErrInFlight) {
					errs <- err
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Send: %v", err)
	}
	for _, k := range keys {
		if got := p.saw(k, 0); got != 1 {
			t.Fatalf("%d concurrent Sends of %s showed %d messages, want 1", copies, k, got)
		}
	}
}

// testReplySlots: the replies of a message are recorded apart, by slot, with
// tokens of their own; Flush sends those recorded and not sent, and stops
// at the first slot without a record.
func testReplySlots(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	p, k, ctx := newReplyPlatform(true), s.key(), context.Background()
	snd := s.sender(st, replyPreset)
	tokens := map[string]bool{}
	for slot := range 3 {
		if slot == 1 {
			p.lose = 1 // slot 1's outcome is unknown: Flush sends it again with its token
		}
		r, err := snd.Send(ctx, k, slot, body(fmt.Sprint("reply ", slot)), p.send)
		if err != nil && !errors.Is(err, errReplyLost) {
			t.Fatalf("Send of slot %d: %v", slot, err)
		}
		tokens[r.Token] = true
	}
	if len(tokens) != 3 {
		t.Fatalf("3 slots had %d distinct tokens", len(tokens))
	}
	rs, err := snd.Flush(ctx, k, p.send)
	if err != nil || len(rs) != 3 || rs[0].Sent || !rs[1].Sent || rs[2].Sent {
		t.Fatalf("Flush = %+v, %v; want 3 receipts, slot 1 sent now", rs, err)
	}
	for slot := range 3 {
		if got := p.saw(k, slot); got != 1 {
			t.Fatalf("the user saw %d messages of slot %d, want 1", got, slot)
		}
	}
	if rs, err := snd.Flush(ctx, s.key(), p.send); err != nil || len(rs) != 0 {
		t.Fatalf("Flush of a message without replies = %+v, %v", rs, err)
	}
	_, err = snd.Send(ctx, k, 3, nil, p.send)
	wantReplyErr(t, err, reply.ErrNoReply, "Send of a slot without a record, compose nil")
}

// testReplyTTL: a record lasts its TTL, then the reply is new again.
func testReplyTTL(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	p, k, ctx := newReplyPlatform(false), s.key(), context.Background()
	snd := s.sender(st, reply.Telegram, reply.WithTTL(s.d(10*time.Minute)))
	start := s.now() // the record is made after it, so it lasts until start + TTL at least
	if _, err := snd.Send(ctx, k, 0, body("answer"), p.send); err != nil {
		t.Fatalf("Send: %v", err)
	}
	s.wait(5 * time.Minute)
	r, err := snd.Send(ctx, k, 0, body("answer"), p.send)
	switch late := s.now().Sub(start) >= s.d(10*time.Minute); {
	case err != nil:
		t.Fatalf("Send within the TTL: %v", err)
	case late:
		t.Logf("the second Send returned after the TTL (a loaded machine): its receipt %+v, and what follows, are not checked", r)
		return
	case r.Sent:
		t.Fatalf("Send within the TTL = %+v; want the record's receipt", r)
	}
	s.wait(6 * time.Minute)
	if r, err := snd.Send(ctx, k, 0, body("answer"), p.send); err != nil || !r.Sent || r.Attempts != 1 {
		t.Fatalf("Send past the TTL = %+v, %v; want sent anew", r, err)
	}
}

// testReplyBadRecord: a record another program wrote, or cut short, is an
// error, and nothing is sent.
func testReplyBadRecord(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	p, ctx := newReplyPlatform(false), context.Background()
	for _, res := range [][]byte{{0x7f}, []byte("not a record"), {1, 9, 0, 0, 0}} {
		k := s.key()
		rk := dedupe.Key{Channel: "dedupe.reply", MessageID: k.String() + "#0"}
		markResult(t, st, rk, res, s.d(10*time.Minute))
		_, err := s.sender(st, reply.Telegram).Send(ctx, k, 0, body("answer"), p.send)
		wantReplyErr(t, err, reply.ErrBadRecord, fmt.Sprintf("Send over a record %q", res))
	}
	if p.sends != 0 {
		t.Fatalf("%d sends over unreadable records, want 0", p.sends)
	}
}

// testReplyClosed: Send and Flush on a closed store fail with ErrClosed,
// sending nothing.
func testReplyClosed(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	p, k, ctx := newReplyPlatform(false), s.key(), context.Background()
	snd := s.sender(st, reply.Telegram)
	closeStore(t, st)
	_, err := snd.Send(ctx, k, 0, body("answer"), p.send)
	wantReplyErr(t, err, dedupe.ErrClosed, "Send on a closed store")
	_, err = snd.Flush(ctx, k, p.send)
	wantReplyErr(t, err, dedupe.ErrClosed, "Flush on a closed store")
	if p.sends != 0 {
		t.Fatalf("%d sends on a closed store, want 0", p.sends)
	}
}

// errTxRollback makes DoTx roll its transaction back, in the tests of
// MarkResultTx and IntendTx.
var errTxRollback = errors.New("dedupetest: roll back")

// replyTxGroups returns the groups of RunTx for a store that is a
// [reply.TxStore]: MarkResultTx, and IntendTx with Flush.
func replyTxGroups[Tx any](t *testing.T, cfg TxConfig[Tx]) []txGroup[Tx] {
	t.Helper()
	st := cfg.New(t, Options{})
	if st == nil {
		t.Fatal("dedupetest: TxConfig.New returned nil")
	}
	defer st.Close()
	if _, ok := st.(reply.TxStore[Tx]); !ok {
		var tx Tx
		t.Logf("dedupetest: %s store is not a reply.TxStore[%T]: no MarkResultTx and IntendTx groups", st.Backend(), tx)
		return nil
	}
	return []txGroup[Tx]{{"MarkResultTx", testMarkResultTx[Tx]}, {"IntendTx", testIntendTx[Tx]}}
}

// testMarkResultTx: a mark and result written in DoTx's transaction of
// another key are visible once it commits, gone if it rolls back; they
// replace a mark and its result, clear a claim, and a result over the limit
// is refused.
func testMarkResultTx[Tx any](t *testing.T, x *txSuite[Tx]) {
	st, ts := x.open(t)
	rts := st.(reply.TxStore[Tx])
	ctx := context.Background()
	markIn := func(k dedupe.Key, res []byte, fail error) error {
		return ts.DoTx(ctx, x.key(), func(ctx context.Context, tx Tx) error {
			if err := rts.MarkResultTx(ctx, tx, k, res, time.Hour); err != nil {
				return err
			}
			return fail
		})
	}
	committed, rolled, replaced, claimed := x.key(), x.key(), x.key(), x.key()
	if err := markIn(committed, []byte("kept"), nil); err != nil {
		t.Fatalf("MarkResultTx in a committed transaction: %v", err)
	}
	wantResult(t, st, committed, []byte("kept"), true, "after MarkResultTx committed")
	if err := markIn(rolled, []byte("gone"), errTxRollback); !errors.Is(err, errTxRollback) {
		t.Fatalf("DoTx rolled back: %v", err)
	}
	wantResult(t, st, rolled, nil, false, "after MarkResultTx rolled back")
	claim(t, st, rolled, time.Hour, dedupe.Claimed)

	markResult(t, st, replaced, []byte("first"), time.Hour)
	if err := markIn(replaced, []byte("second"), nil); err != nil {
		t.Fatalf("MarkResultTx over a mark: %v", err)
	}
	wantResult(t, st, replaced, []byte("second"), true, "after MarkResultTx over a mark")
	if err := markIn(replaced, nil, nil); err != nil {
		t.Fatalf("MarkResultTx of no result: %v", err)
	}
	wantResult(t, st, replaced, nil, true, "after MarkResultTx of no result")

	c := claim(t, st, claimed, time.Hour, dedupe.Claimed)
	if err := markIn(claimed, []byte("over a claim"), nil); err != nil {
		t.Fatalf("MarkResultTx over a claim: %v", err)
	}
	wantResult(t, st, claimed, []byte("over a claim"), true, "after MarkResultTx over a claim")
	wantErr(t, st.Release(ctx, c), dedupe.ErrNotOwner, "Release of a claim MarkResultTx replaced")
	claim(t, st, claimed, time.Hour, dedupe.Duplicate)

	big := x.key()
	wantErr(t, markIn(big, make([]byte, dedupe.MaxResultSize+1), nil), dedupe.ErrTooLarge, "MarkResultTx over MaxResultSize")
	wantExists(t, st, big, false, "after a refused MarkResultTx")
}

// testIntendTx: replies recorded with IntendTx commit with the caller's
// effect and the message's mark, and Flush sends them after the commit,
// once; a rollback leaves no effect and no reply.
func testIntendTx[Tx any](t *testing.T, x *txSuite[Tx]) {
	st, ts := x.open(t)
	ctx := context.Background()
	p := newReplyPlatform(true)
	snd := reply.New(st, replyPreset)
	handle := func(k dedupe.Key, fail error) error {
		return ts.DoTx(ctx, k, func(ctx context.Context, tx Tx) error {
			if err := x.cfg.Effect(ctx, tx, k); err != nil {
				return err
			}
			for slot := range 2 {
				if err := reply.IntendTx(ctx, snd, tx, k, slot, []byte(fmt.Sprint("reply ", slot))); err != nil {
					return err
				}
			}
			return fail
		})
	}
	done, failed := x.key(), x.key()
	if err := handle(done, nil); err != nil {
		t.Fatalf("DoTx with IntendTx: %v", err)
	}
	x.wantEffects(t, st, done, 1, "after DoTx with IntendTx")
	if p.sends != 0 {
		t.Fatal("IntendTx sent")
	}
	wantErr(t, handle(done, nil), dedupe.ErrDuplicate, "DoTx of a redelivery")
	for range 2 { // the redelivery's Flush, then another
		rs, err := snd.Flush(ctx, done, p.send)
		if err != nil || len(rs) != 2 {
			t.Fatalf("Flush after the commit = %+v, %v; want 2 receipts", rs, err)
		}
	}
	if p.sends != 2 || p.saw(done, 0) != 1 || p.saw(done, 1) != 1 {
		t.Fatalf("Flush twice: %d sends, seen %d and %d; want each reply sent once", p.sends, p.saw(done, 0), p.saw(done, 1))
	}

	if err := handle(failed, errTxRollback); !errors.Is(err, errTxRollback) {
		t.Fatalf("DoTx rolled back: %v", err)
	}
	x.wantEffects(t, st, failed, 0, "after a rolled back DoTx with IntendTx")
	if rs, err := snd.Flush(ctx, failed, p.send); err != nil || len(rs) != 0 {
		t.Fatalf("Flush after a rollback = %+v, %v; want nothing", rs, err)
	}
	mem := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer mem.Close()
	if err := reply.IntendTx(ctx, reply.New(mem, replyPreset), *new(Tx), done, 0, nil); err == nil {
		t.Fatal("IntendTx on a store that is not a TxStore: no error")
	}
}
