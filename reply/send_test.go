package reply_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
	"github.com/gatewaykit/dedupe/reply"
)

var msgKey = dedupe.Key{Channel: "line", MessageID: "U1-468789577898262530"}

// rig is a Sender over a memory store and a test platform, on a fake clock.
type rig struct {
	clock    *dedupetest.Clock
	store    *dedupe.MemoryStore
	p        *platform
	s        *reply.Sender
	log      *bytes.Buffer
	composed atomic.Int32
}

func newRig(t *testing.T, pf reply.Platform, honour bool, opts ...reply.Option) *rig {
	t.Helper()
	r := &rig{clock: dedupetest.NewClock(time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)), log: &bytes.Buffer{}}
	r.store = dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: r.clock.Now})
	t.Cleanup(func() { _ = r.store.Close() })
	r.p = newPlatform(honour, pf.Window, r.clock.Now)
	logger := slog.New(slog.NewTextHandler(r.log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	r.s = reply.New(r.store, pf, append([]reply.Option{reply.WithClock(r.clock.Now), reply.WithLogger(logger)}, opts...)...)
	return r
}

func (r *rig) compose(body string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		r.composed.Add(1)
		return []byte(body), nil
	}
}

func (r *rig) send(slot int, body string) (reply.Receipt, error) {
	return r.s.Send(context.Background(), msgKey, slot, r.compose(body), r.p.send)
}

func TestSendOnce(t *testing.T) {
	r := newRig(t, reply.LINE, true)
	first, err := r.send(0, "hello")
	require.NoError(t, err)
	assert.Equal(t, reply.Receipt{ID: "msg-1", Token: reply.UUID(msgKey, 0), Attempts: 1, Sent: true}, first)

	again, err := r.send(0, "hello, composed again")
	require.NoError(t, err)
	assert.Equal(t, reply.Receipt{ID: "msg-1", Token: reply.UUID(msgKey, 0), Attempts: 1}, again, "a resend after a recorded send")
	assert.EqualValues(t, 1, r.composed.Load(), "compose ran once")
	assert.Equal(t, 1, r.p.seen())
	assert.Equal(t, 1, r.p.sends, "the platform got one request")
}

// Each policy after a send whose outcome is unknown: accepted by the
// platform with its answer lost, or lost before the platform saw it; within
// the platform's window and past it.
func TestUnknownOutcome(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pf       reply.Platform
		opts     []reply.Option
		first    outcome
		late     bool // the second Send comes past the platform's window
		seen     int  // messages the user saw
		lost     bool // the second Send returns ErrMaybeLost
		dup      bool // Receipt.MaybeDuplicate
		warnings string
	}{
		{name: "native accepted", pf: reply.LINE, first: acceptLost, seen: 1},
		{name: "native not accepted", pf: reply.LINE, first: lostBefore, seen: 1},
		{name: "native past window", pf: reply.Discord, first: acceptLost, late: true, seen: 1, lost: true, warnings: "possibly lost"},
		{name: "native past window, not accepted", pf: reply.Discord, first: lostBefore, late: true, seen: 0, lost: true, warnings: "possibly lost"},
		{name: "at most once accepted", pf: reply.Telegram, first: acceptLost, seen: 1, lost: true, warnings: "possibly lost"},
		{name: "at most once not accepted", pf: reply.Telegram, first: lostBefore, seen: 0, lost: true, warnings: "possibly lost"},
		{name: "at least once accepted", pf: reply.Telegram, opts: []reply.Option{reply.WithPolicy(reply.AtLeastOnce)},
			first: acceptLost, seen: 2, dup: true, warnings: "possibly duplicated"},
		{name: "at least once not accepted", pf: reply.Slack, opts: []reply.Option{reply.WithPolicy(reply.AtLeastOnce)},
			first: lostBefore, seen: 1, dup: true, warnings: "possibly duplicated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, tc.pf, true, tc.opts...)
			r.p.then(tc.first)
			rc, err := r.send(0, "answer")
			require.ErrorIs(t, err, errTimeout)
			assert.False(t, rc.Sent)
			assert.Contains(t, r.log.String(), "outcome unknown")
			if tc.late {
				r.clock.Advance(tc.pf.Window)
			}
			rc, err = r.send(0, "answer")
			if tc.lost {
				require.ErrorIs(t, err, reply.ErrMaybeLost)
				assert.False(t, rc.Sent)
				_, err = r.send(0, "answer")
				require.ErrorIs(t, err, reply.ErrMaybeLost, "and every later Send")
			} else {
				require.NoError(t, err)
				assert.True(t, rc.Sent)
				assert.Equal(t, 2, rc.Attempts)
				assert.Equal(t, tc.dup, rc.MaybeDuplicate)
				again, err := r.send(0, "answer")
				require.NoError(t, err)
				assert.False(t, again.Sent, "a Send after the resend")
			}
			assert.Equal(t, tc.seen, r.p.seen(), "messages the user saw")
			assert.EqualValues(t, 1, r.composed.Load(), "compose ran once")
			if tc.warnings != "" {
				assert.Contains(t, r.log.String(), tc.warnings)
			}
		})
	}
}

// A refused send (NotSent) is sent again under any policy, and is not
// reported lost.
func TestNotSentResends(t *testing.T) {
	for _, pf := range []reply.Platform{reply.LINE, reply.Telegram, reply.Slack} {
		t.Run(pf.Name, func(t *testing.T) {
			r := newRig(t, pf, true)
			r.p.then(refuse)
			_, err := r.send(0, "answer")
			require.Error(t, err)
			assert.True(t, reply.IsNotSent(err), "the error still says not sent: %v", err)
			rc, err := r.send(0, "answer")
			require.NoError(t, err)
			assert.True(t, rc.Sent)
			assert.Equal(t, 2, rc.Attempts)
			assert.False(t, rc.MaybeDuplicate)
			assert.Equal(t, 1, r.p.seen())
			assert.NotContains(t, r.log.String(), "possibly")
		})
	}
	assert.NoError(t, reply.NotSent(nil))
	assert.False(t, reply.IsNotSent(errors.New("x")))
}

// A read-back decides for the policy: found, the reply is recorded sent;
// not found, it is sent again even at most once.
func TestCheck(t *testing.T) {
	for _, found := range []bool{true, false} {
		t.Run(map[bool]string{true: "found", false: "not found"}[found], func(t *testing.T) {
			var asked []reply.Message
			check := func(_ context.Context, m reply.Message) (string, bool, error) {
				asked = append(asked, m)
				if found {
					return "msg-1", true, nil
				}
				return "", false, nil
			}
			r := newRig(t, reply.Slack, false, reply.WithCheck(check))
			r.p.then(map[bool]outcome{true: acceptLost, false: lostBefore}[found])
			_, err := r.send(0, "answer")
			require.ErrorIs(t, err, errTimeout)
			rc, err := r.send(0, "answer")
			require.NoError(t, err)
			require.Len(t, asked, 1)
			assert.Equal(t, "answer", string(asked[0].Body))
			assert.Equal(t, !found, rc.Sent)
			assert.Equal(t, "msg-1", rc.ID)
			assert.Equal(t, 1, r.p.seen())
			again, err := r.send(0, "answer")
			require.NoError(t, err)
			assert.Equal(t, "msg-1", again.ID)
			assert.Len(t, asked, 1, "the check is not asked of a reply recorded sent")
		})
	}
	t.Run("error", func(t *testing.T) {
		errCheck := errors.New("history unavailable")
		r := newRig(t, reply.Slack, false, reply.WithCheck(func(context.Context, reply.Message) (string, bool, error) {
			return "", false, errCheck
		}))
		r.p.then(acceptLost)
		_, err := r.send(0, "answer")
		require.ErrorIs(t, err, errTimeout)
		_, err = r.send(0, "answer")
		require.ErrorIs(t, err, errCheck)
		assert.Equal(t, 1, r.p.seen())
	})
}

func TestSendInputs(t *testing.T) {
	r := newRig(t, reply.LINE, true)
	ctx := context.Background()
	_, err := r.s.Send(ctx, msgKey, 0, nil, r.p.send)
	require.ErrorIs(t, err, reply.ErrNoReply)

	errCompose := errors.New("model down")
	_, err = r.s.Send(ctx, msgKey, 0, func(context.Context) ([]byte, error) { return nil, errCompose }, r.p.send)
	require.ErrorIs(t, err, errCompose)
	_, err = r.s.Send(ctx, msgKey, 0, nil, r.p.send)
	require.ErrorIs(t, err, reply.ErrNoReply, "a failed compose records nothing")

	_, err = r.s.Send(ctx, msgKey, 0, func(context.Context) ([]byte, error) { return make([]byte, dedupe.MaxResultSize), nil }, r.p.send)
	require.ErrorIs(t, err, dedupe.ErrTooLarge)
	assert.Zero(t, r.p.sends, "a body too large is not sent")

	_, err = r.s.Send(ctx, dedupe.Key{Channel: "a:b", MessageID: "1"}, 0, r.compose("x"), r.p.send)
	require.ErrorIs(t, err, dedupe.ErrInvalidKey)
	_, err = r.s.Send(ctx, msgKey, -1, r.compose("x"), r.p.send)
	require.ErrorIs(t, err, dedupe.ErrInvalidKey)
	_, err = r.s.Send(ctx, msgKey, 0, r.compose("x"), nil)
	require.Error(t, err)
	for _, err := range []error{reply.ErrMaybeLost, reply.ErrNoReply, reply.ErrBadRecord} {
		assert.True(t, strings.HasPrefix(err.Error(), "reply: "), err)
	}
}

// A record that cannot be read is an error, and nothing is sent.
func TestBadRecord(t *testing.T) {
	for name, res := range map[string][]byte{
		"version":   {9, 1, 0, 0, 0},
		"state":     {1, 7, 0, 0, 0},
		"short":     {1},
		"header":    {1, 2, 0x80},
		"id":        {1, 2, 1, 0, 40, 'x'},
		"sent at 0": {1, 2, 0, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t, reply.LINE, true)
			rk := dedupe.Key{Channel: "dedupe.reply", MessageID: msgKey.String() + "#0"}
			require.NoError(t, r.store.MarkResult(context.Background(), rk, res, 0))
			_, err := r.send(0, "answer")
			require.ErrorIs(t, err, reply.ErrBadRecord)
			assert.Zero(t, r.p.sends)
			assert.Zero(t, r.composed.Load())
		})
	}
	t.Run("mark without result", func(t *testing.T) {
		r := newRig(t, reply.LINE, true)
		rk := dedupe.Key{Channel: "dedupe.reply", MessageID: msgKey.String() + "#0"}
		require.NoError(t, r.store.Mark(context.Background(), rk, 0))
		_, err := r.send(0, "answer")
		require.ErrorIs(t, err, reply.ErrBadRecord)
		assert.Zero(t, r.p.sends)
	})
}

// A copy handling the same reply meanwhile gets ErrInFlight; concurrent
// Sends of one reply send it once.
func TestSendConcurrent(t *testing.T) {
	r := newRig(t, reply.Telegram, false)
	lock := dedupe.NewClaim(dedupe.Key{Channel: "dedupe.reply-lock", MessageID: msgKey.String() + "#0"})
	st, err := r.store.Claim(context.Background(), lock, time.Minute)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, st)
	_, err = r.send(0, "answer")
	require.ErrorIs(t, err, dedupe.ErrInFlight)
	require.NoError(t, r.store.Release(context.Background(), lock))

	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			_, err := r.send(0, "answer")
			if err != nil && !errors.Is(err, dedupe.ErrInFlight) {
				t.Errorf("Send: %v", err)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, 1, r.p.seen())
}

// A lock that ran out while compose ran (another copy may have taken the
// reply) sends nothing.
func TestLockLostInCompose(t *testing.T) {
	r := newRig(t, reply.Telegram, false, reply.WithLease(time.Second))
	var rival dedupe.Claim
	compose := func(ctx context.Context) ([]byte, error) {
		r.clock.Advance(2 * time.Second)
		rival = dedupe.NewClaim(dedupe.Key{Channel: "dedupe.reply-lock", MessageID: msgKey.String() + "#0"})
		st, err := r.store.Claim(ctx, rival, time.Minute)
		require.NoError(t, err)
		require.Equal(t, dedupe.Claimed, st)
		return []byte("slow answer"), nil
	}
	_, err := r.s.Send(context.Background(), msgKey, 0, compose, r.p.send)
	require.ErrorIs(t, err, dedupe.ErrInFlight)
	assert.Zero(t, r.p.sends)
	require.NoError(t, r.store.Release(context.Background(), rival))
	_, err = r.s.Send(context.Background(), msgKey, 0, nil, r.p.send)
	require.ErrorIs(t, err, reply.ErrNoReply, "nothing was recorded")
}

// Flush sends the recorded replies not yet sent, in slot order, up to the
// first slot without a record; a reply the policy will not send again is
// skipped and reported.
func TestFlush(t *testing.T) {
	r := newRig(t, reply.Telegram, false)
	ctx := context.Background()
	_, err := r.send(0, "zero")
	require.NoError(t, err)
	r.p.then(acceptLost)
	_, err = r.send(1, "one")
	require.ErrorIs(t, err, errTimeout)
	r.p.then(refuse)
	_, err = r.send(2, "two")
	require.True(t, reply.IsNotSent(err))
	_, err = r.send(4, "four, after a gap")
	require.NoError(t, err)

	rs, err := r.s.Flush(ctx, msgKey, r.p.send)
	require.ErrorIs(t, err, reply.ErrMaybeLost)
	require.Len(t, rs, 3)
	assert.False(t, rs[0].Sent)
	assert.False(t, rs[1].Sent)
	assert.True(t, rs[2].Sent)
	assert.Equal(t, []string{"zero", "one", "four, after a gap", "two"}, shownText(r.p))

	rs, err = r.s.Flush(ctx, dedupe.Key{Channel: "line", MessageID: "none"}, r.p.send)
	require.NoError(t, err)
	assert.Empty(t, rs)
}

func shownText(p *platform) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var s []string
	for _, b := range p.shown {
		s = append(s, string(b))
	}
	return s
}

// Records expire with their TTL, never before the platform's window.
func TestRecordTTL(t *testing.T) {
	r := newRig(t, reply.LINE, true, reply.WithTTL(time.Minute))
	_, err := r.send(0, "answer")
	require.NoError(t, err)
	r.clock.Advance(23 * time.Hour)
	rc, err := r.send(0, "answer")
	require.NoError(t, err)
	assert.False(t, rc.Sent, "kept for LINE's 24 h window, not the 1 minute asked")
	r.clock.Advance(time.Hour)
	rc, err = r.send(0, "answer")
	require.NoError(t, err)
	assert.True(t, rc.Sent, "forgotten after its TTL: sent anew")
	assert.Equal(t, 2, r.p.seen(), "past the record's TTL and the platform's window, a reply is new again")
}

func TestPolicyString(t *testing.T) {
	assert.Equal(t, "native", reply.Native.String())
	assert.Equal(t, "at-most-once", reply.AtMostOnce.String())
	assert.Equal(t, "at-least-once", reply.AtLeastOnce.String())
	assert.Equal(t, "policy(9)", reply.Policy(9).String())
}

// lineKeys is LINE's push API as "Retry failed API requests" describes its
// retry key: a request with a key accepted within 24 hours of the key's
// first request is blocked (409, nothing sent); "The retry key is valid for
// 24 hours after attempting the first request", so past them the key is new
// again, and a request with it sends a message. Its script answers the
// next requests: "429" (refused, nothing sent, the key's first request all
// the same), "lost" (sent, the answer lost), anything else or none: as LINE.
type lineKeys struct {
	now    func() time.Time
	script []string
	first  map[string]time.Time // key → its first request
	sent   map[string]bool      // key → accepted since its first request
	shown  int                  // messages the user saw
}

func (l *lineKeys) send(_ context.Context, m reply.Message) (string, error) {
	now := l.now()
	if f, ok := l.first[m.Token]; !ok || now.Sub(f) >= 24*time.Hour {
		l.first[m.Token], l.sent[m.Token] = now, false
	}
	o := ""
	if len(l.script) > 0 {
		o, l.script = l.script[0], l.script[1:]
	}
	switch {
	case o == "429":
		return "", reply.NotSent(errors.New("line: 429 too many requests"))
	case l.sent[m.Token]:
		return "line-1", nil // 409: accepted before
	}
	l.sent[m.Token] = true
	l.shown++
	if o == "lost" {
		return "", errTimeout
	}
	return "line-" + strconv.Itoa(l.shown), nil
}

// LINE's retry key is valid for 24 hours from its first request, a refused
// one included: a reply refused (429) at first, sent 5 h later with its
// outcome unknown, is not sent again 26 h after the first request (its key
// no longer blocks a repeat) but reported possibly lost; within the 24
// hours it is sent again and LINE blocks the repeat. AtLeastOnce sends it
// and says MaybeDuplicate. On a record that measured the window from the
// send after the refusal, the resend at 26 h went out as a native one:
// two messages, MaybeDuplicate false.
func TestLINEWindowFromFirstRequest(t *testing.T) {
	for _, tc := range []struct {
		name  string
		last  time.Duration // the last Send, after the first request
		opts  []reply.Option
		shown int
		lost  bool
		dup   bool
	}{
		{name: "past 24 h", last: 26 * time.Hour, shown: 1, lost: true},
		{name: "within 24 h", last: 20 * time.Hour, shown: 1},
		{name: "past 24 h, at least once", last: 26 * time.Hour, opts: []reply.Option{reply.WithPolicy(reply.AtLeastOnce)}, shown: 2, dup: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Records kept 48 h, so that the one written at 5 h outlives
			// the last Send (past its TTL a reply is forgotten).
			r := newRig(t, reply.LINE, true, append([]reply.Option{reply.WithTTL(48 * time.Hour)}, tc.opts...)...)
			l := &lineKeys{now: r.clock.Now, script: []string{"429", "lost"}, first: map[string]time.Time{}, sent: map[string]bool{}}
			send := func() (reply.Receipt, error) {
				return r.s.Send(context.Background(), msgKey, 0, r.compose("answer"), l.send)
			}
			_, err := send()
			require.True(t, reply.IsNotSent(err), "429: %v", err)
			r.clock.Advance(5 * time.Hour)
			_, err = send()
			require.ErrorIs(t, err, errTimeout)
			r.clock.Advance(tc.last - 5*time.Hour)
			rc, err := send()
			if tc.lost {
				require.ErrorIs(t, err, reply.ErrMaybeLost, "receipt %+v", rc)
				assert.False(t, rc.Sent)
				assert.Contains(t, r.log.String(), "possibly lost")
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.dup, rc.MaybeDuplicate)
			}
			assert.Equal(t, tc.shown, l.shown, "messages the user saw")
		})
	}
}
