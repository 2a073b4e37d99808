package dedupetelebot_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupetelebot"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"
)

// probe is a handler that counts its calls, notes whether two ever ran at
// once, fails its first calls while fail is above zero, and holds each call
// until hold is closed, if set.
type probe struct {
	calls, running, fail atomic.Int32
	overlapped           atomic.Bool
	entered              chan struct{}
	hold                 chan struct{} // nil: do not hold
}

var errHandler = errors.New("handler failed")

func newProbe() *probe { return &probe{entered: make(chan struct{}, 64)} }

func (p *probe) handle(tele.Context) error {
	p.calls.Add(1)
	if p.running.Add(1) > 1 {
		p.overlapped.Store(true)
	}
	defer p.running.Add(-1)
	p.entered <- struct{}{}
	if p.hold != nil {
		<-p.hold
	}
	if p.fail.Add(-1) >= 0 {
		return errHandler
	}
	return nil
}

// errs collects what the bot passes to OnError.
type errs struct {
	mu   sync.Mutex
	errs []error
}

func (e *errs) onError(err error, _ tele.Context) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *errs) list() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// newBot returns an offline bot whose text handler is p behind the
// middleware, and the errors it reports.
func newBot(t *testing.T, d *dedupe.Deduper, channel string, p *probe, opts ...dedupe.Option) (*tele.Bot, *errs) {
	t.Helper()
	e := &errs{}
	b, err := tele.NewBot(tele.Settings{Offline: true, Synchronous: true, OnError: e.onError})
	require.NoError(t, err)
	b.Use(dedupetelebot.Middleware(d, channel, opts...))
	b.Handle(tele.OnText, p.handle)
	return b, e
}

func text(id int) tele.Update { return tele.Update{ID: id, Message: &tele.Message{Text: "hi"}} }

func TestMiddlewareDropsCopies(t *testing.T) {
	p := newProbe()
	b, e := newBot(t, dedupe.New(nil), "", p)
	for range 3 {
		b.ProcessUpdate(text(1))
	}
	b.ProcessUpdate(text(2))
	assert.EqualValues(t, 2, p.calls.Load())
	assert.Empty(t, e.list(), "a duplicate is dropped, not an error")
}

func TestMiddlewareFailureReleases(t *testing.T) {
	p := newProbe()
	p.fail.Store(1)
	b, e := newBot(t, dedupe.New(nil), "", p)

	b.ProcessUpdate(text(1))
	require.Len(t, e.list(), 1)
	assert.ErrorIs(t, e.list()[0], errHandler, "the handler's error reaches OnError")

	b.ProcessUpdate(text(1)) // the redelivery is processed
	b.ProcessUpdate(text(1)) // and then marked
	assert.EqualValues(t, 2, p.calls.Load())
	assert.Len(t, e.list(), 1)
}

// TestMiddlewareInFlight sends a copy while the first is processed, to a
// middleware whose wait ends first: the copy is dropped, and is no error for
// OnError.
func TestMiddlewareInFlight(t *testing.T) {
	p := newProbe()
	p.hold = make(chan struct{})
	d := dedupe.New(nil)
	b, e := newBot(t, d, "", p, dedupe.WithWait(time.Millisecond))

	done := make(chan struct{})
	go func() {
		defer close(done)
		b.ProcessUpdate(text(1))
	}()
	<-p.entered
	b.ProcessUpdate(text(1)) // a copy while the first is processed
	close(p.hold)
	<-done

	assert.EqualValues(t, 1, p.calls.Load())
	assert.EqualValues(t, 1, d.Stats().InFlight)
	assert.Empty(t, e.list(), "a copy in flight is no error")
}

// TestMiddlewareWait sends concurrent copies while the first is held, to a
// middleware whose Deduper waits for the owner: they never run beside it,
// and they run after it only if it failed.
func TestMiddlewareWait(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      int32
		wantCalls int32
	}{
		{"owner succeeds", 0, 1},
		{"owner fails", 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const copies = 8
			d := dedupe.New(nil)
			p := newProbe()
			p.hold = make(chan struct{})
			p.fail.Store(tc.fail)
			b, _ := newBot(t, d, "", p, dedupe.WithWait(time.Minute))

			var wg sync.WaitGroup
			wg.Go(func() { b.ProcessUpdate(text(1)) })
			<-p.entered
			for range copies {
				wg.Go(func() { b.ProcessUpdate(text(1)) })
			}
			require.Eventually(t, func() bool { return d.Stats().Waits == copies },
				10*time.Second, time.Millisecond, "every copy waits for the owner")
			close(p.hold)
			wg.Wait()

			assert.Equal(t, tc.wantCalls, p.calls.Load())
			assert.False(t, p.overlapped.Load(), "two copies ran at once")
		})
	}
}

func TestMiddlewareTwoBotsShareAStore(t *testing.T) {
	d := dedupe.New(nil)
	pa, pb := newProbe(), newProbe()
	a, _ := newBot(t, d, "telegram-a", pa)
	b, _ := newBot(t, d, "telegram-b", pb)
	for range 2 {
		a.ProcessUpdate(text(1))
		b.ProcessUpdate(text(1))
	}
	assert.EqualValues(t, 1, pa.calls.Load())
	assert.EqualValues(t, 1, pb.calls.Load(), "bot b's update 1 is not bot a's")
}

func TestMiddlewareUpdateWithoutID(t *testing.T) {
	p := newProbe()
	b, e := newBot(t, dedupe.New(nil), "", p)
	b.ProcessUpdate(text(0))
	b.ProcessUpdate(text(0))
	assert.EqualValues(t, 2, p.calls.Load(), "no id, no deduplication")
	assert.Empty(t, e.list())
}

func TestMiddlewareInvalidChannel(t *testing.T) {
	p := newProbe()
	b, e := newBot(t, dedupe.New(nil), "tele:gram", p)
	b.ProcessUpdate(text(1))
	assert.Zero(t, p.calls.Load())
	require.Len(t, e.list(), 1)
	assert.ErrorIs(t, e.list()[0], dedupe.ErrInvalidKey)
}
