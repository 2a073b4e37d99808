package dedupegotelegram_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupegotelegram"
	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probe is a handler for Middleware that counts its calls, notes whether two ever ran at
// once, panics in its first calls while fail is above zero, and holds each
// call until hold is closed, if set.
type probe struct {
	calls, running, fail atomic.Int32
	overlapped           atomic.Bool
	entered              chan struct{}
	hold                 chan struct{} // nil: do not hold
}

func newProbe() *probe { return &probe{entered: make(chan struct{}, 64)} }

func (p *probe) handle(context.Context, *bot.Bot, *models.Update) {
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
		panic("handler failed")
	}
}

// recovered is a middleware that recovers a handler's panic and counts it, as
// a bot's outermost middleware does.
type recovered struct{ panics atomic.Int32 }

func (r *recovered) middleware(next bot.HandlerFunc) bot.HandlerFunc {
	return func(ctx context.Context, b *bot.Bot, u *models.Update) {
		defer func() {
			if recover() != nil {
				r.panics.Add(1)
			}
		}()
		next(ctx, b, u)
	}
}

// newBot returns a bot that reaches no network and runs its handlers in the
// caller's goroutine: a recovering middleware, the deduplicating one, and p as
// the default handler.
func newBot(t *testing.T, d *dedupe.Deduper, channel string, p *probe, opts ...dedupe.Option) (*bot.Bot, *recovered) {
	t.Helper()
	r := &recovered{}
	b, err := bot.New("123:token", bot.WithSkipGetMe(), bot.WithNotAsyncHandlers(),
		bot.WithMiddlewares(r.middleware, dedupegotelegram.Middleware(d, channel, opts...)),
		bot.WithDefaultHandler(p.handle))
	require.NoError(t, err)
	return b, r
}

func text(id int64) *models.Update {
	return &models.Update{ID: id, Message: &models.Message{Text: "hi"}}
}

func TestMiddlewareDropsCopies(t *testing.T) {
	p := newProbe()
	b, _ := newBot(t, dedupe.New(nil), "", p)
	for range 3 {
		b.ProcessUpdate(t.Context(), text(1))
	}
	b.ProcessUpdate(t.Context(), text(2))
	assert.EqualValues(t, 2, p.calls.Load())
}

func TestMiddlewarePanicReleases(t *testing.T) {
	p := newProbe()
	p.fail.Store(1)
	d := dedupe.New(nil)
	b, r := newBot(t, d, "", p)

	b.ProcessUpdate(t.Context(), text(1))
	assert.EqualValues(t, 1, r.panics.Load(), "the panic goes on to the recovering middleware")
	b.ProcessUpdate(t.Context(), text(1)) // the redelivery is processed
	b.ProcessUpdate(t.Context(), text(1)) // and then marked
	assert.EqualValues(t, 2, p.calls.Load())
	assert.EqualValues(t, 1, d.Stats().Failed)
}

func TestMiddlewareInFlight(t *testing.T) {
	p := newProbe()
	p.hold = make(chan struct{})
	d := dedupe.New(nil)
	b, _ := newBot(t, d, "", p, dedupe.WithWait(time.Millisecond)) // the copy's wait ends first

	done := make(chan struct{})
	go func() {
		defer close(done)
		b.ProcessUpdate(t.Context(), text(1))
	}()
	<-p.entered
	b.ProcessUpdate(t.Context(), text(1)) // a copy while the first is processed
	close(p.hold)
	<-done

	assert.EqualValues(t, 1, p.calls.Load())
	assert.EqualValues(t, 1, d.Stats().InFlight)
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
		{"owner panics", 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const copies = 8
			d := dedupe.New(nil)
			p := newProbe()
			p.hold = make(chan struct{})
			p.fail.Store(tc.fail)
			b, _ := newBot(t, d, "", p, dedupe.WithWait(time.Minute))

			var wg sync.WaitGroup
			wg.Go(func() { b.ProcessUpdate(t.Context(), text(1)) })
			<-p.entered
			for range copies {
				wg.Go(func() { b.ProcessUpdate(t.Context(), text(1)) })
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
		a.ProcessUpdate(t.Context(), text(1))
		b.ProcessUpdate(t.Context(), text(1))
	}
	assert.EqualValues(t, 1, pa.calls.Load())
	assert.EqualValues(t, 1, pb.calls.Load(), "bot b's update 1 is not bot a's")
}

func TestMiddlewareUpdateWithoutID(t *testing.T) {
	p := newProbe()
	b, _ := newBot(t, dedupe.New(nil), "", p)
	b.ProcessUpdate(t.Context(), text(0))
	b.ProcessUpdate(t.Context(), text(0))
	assert.EqualValues(t, 2, p.calls.Load(), "no id, no deduplication")
}

// TestMiddlewareWebhook serves the bot's own webhook handler, with its
// workers and asynchronous handlers, and posts one update twice, as
// Telegram does when the first answer was late.
func TestMiddlewareWebhook(t *testing.T) {
	d := dedupe.New(nil)
	p := newProbe()
	b, err := bot.New("123:token", bot.WithSkipGetMe(),
		bot.WithMiddlewares(dedupegotelegram.Middleware(d, "telegram")),
		bot.WithDefaultHandler(p.handle))
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	var workers sync.WaitGroup
	workers.Go(func() { b.StartWebhook(ctx) })
	defer func() {
		cancel()
		workers.Wait()
	}()
	srv := httptest.NewServer(b.WebhookHandler())
	defer srv.Close()

	for range 2 {
		resp, err := http.Post(srv.URL, "application/json",
			strings.NewReader(`{"update_id": 1001, "message": {"message_id": 5, "text": "hi"}}`))
		require.NoError(t, err)
		resp.Body.Close()
	}
	require.Eventually(t, func() bool {
		s := d.Stats()
		return s.Processed+s.Duplicates+s.InFlight == 2
	}, 10*time.Second, time.Millisecond)
	assert.EqualValues(t, 1, p.calls.Load())
}
