package dedupegotelegram_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupegotelegram"
	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var errHandler = errors.New("handler failed")

// runs is a handler that returns an error: it counts its runs per update,
// fails every update whose id failEvery divides (on its first run only, if
// at all), and holds each run until gate is closed, if set.
type runs struct {
	failEvery int64
	gate      chan struct{} // nil: do not hold

	mu     sync.Mutex
	counts map[int64]int
}

func newRuns(failEvery int64) *runs { return &runs{failEvery: failEvery, counts: map[int64]int{}} }

func (r *runs) handle(_ context.Context, _ *bot.Bot, u *models.Update) error {
	r.mu.Lock()
	r.counts[u.ID]++
	first := r.counts[u.ID] == 1
	r.mu.Unlock()
	if r.gate != nil {
		<-r.gate
	}
	if first && r.failEvery > 0 && u.ID%r.failEvery == 0 {
		return errHandler
	}
	return nil
}

func (r *runs) of(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[int64(id)]
}

// errs collects what reaches the bot's errors handler.
type errs struct {
	mu   sync.Mutex
	errs []error
}

func (e *errs) onError(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, err)
}

func (e *errs) list() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// handlerBot returns a bot of the fake Telegram whose default handler is r
// behind Handler, with the errors its errors handler got.
func handlerBot(t *testing.T, tg *telegram, d *dedupe.Deduper, r *runs, opts ...dedupe.Option) (*bot.Bot, *errs) {
	t.Helper()
	e := &errs{}
	b, err := bot.New("123:token", bot.WithServerURL(tg.srv.URL), bot.WithSkipGetMe(),
		bot.WithErrorsHandler(e.onError),
		bot.WithDefaultHandler(dedupegotelegram.Handler(d, "", r.handle, e.onError, opts...)))
	require.NoError(t, err)
	return b, e
}

// run runs start (b.Start or b.StartWebhook) until cleanup.
func run(t *testing.T, start func(context.Context)) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { start(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
}

const updates = 10

func ids() []int {
	out := make([]int, updates)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// settled waits until d has decided 2·updates copies of which updates were
// processed.
func settled(t *testing.T, d *dedupe.Deduper, copies int) {
	t.Helper()
	require.Eventually(t, func() bool {
		s := d.Stats()
		return s.Processed == updates && s.Processed+s.Failed+s.Duplicates+s.InFlight == uint64(copies)
	}, 10*time.Second, time.Millisecond)
}

// TestPollingReplicas polls the fake Telegram with two replicas that share a
// Deduper, so that each gets every update, as when a replica starts while
// another has not confirmed its updates. Each update runs once; its other
// copy waits and is dropped, or runs if the first failed (the one
// redelivery a polling bot gets: Telegram hands out nothing again); only the
// handler's errors reach the errors handler.
func TestPollingReplicas(t *testing.T) {
	tg := newTelegram(t)
	d := dedupe.New(nil)
	r := newRuns(5)
	r.gate = make(chan struct{})
	b1, e1 := handlerBot(t, tg, d, r)
	b2, e2 := handlerBot(t, tg, d, r)
	run(t, b1.Start)
	run(t, b2.Start)
	tg.add(ids()...)
	require.Eventually(t, func() bool { return d.Stats().Waits == updates },
		10*time.Second, time.Millisecond, "each update's second copy waits")
	close(r.gate)
	settled(t, d, 2*updates)

	for _, id := range ids() {
		want := 1
		if id%5 == 0 {
			want = 2 // the first copy failed; the waiting one ran
		}
		assert.Equal(t, 2, tg.delivered(id), "deliveries of update %d", id)
		assert.Equal(t, want, r.of(id), "runs of update %d", id)
	}
	errs := append(e1.list(), e2.list()...)
	require.Len(t, errs, 2, "the errors handlers: the handler's two errors, nothing else")
	for _, err := range errs {
		assert.ErrorIs(t, err, errHandler)
	}
	s := d.Stats()
	t.Logf("go-telegram/bot polling, 2 replicas: %d updates, 2 deliveries each; %d processed, %d failed and run by the waiting copy; copies in flight: %d waited, %d duplicates; %d errors handled, 0 panics",
		updates, s.Processed, s.Failed, s.Waits, s.Duplicates, len(errs))
}

// TestWebhookFailureIsNotRedelivered serves the bot's own webhook handler to
// the fake Telegram, which posts each update, twice at once for the odd ones
// (a request repeated after a lost connection), and repeats any post not
// answered 2xx. The bot answers 200 before the handler runs: each post is
// answered 200, each update runs once, a failed one is never posted again.
func TestWebhookFailureIsNotRedelivered(t *testing.T) {
	tg := newTelegram(t)
	d := dedupe.New(nil)
	r := newRuns(5)
	r.gate = make(chan struct{})
	b, e := handlerBot(t, tg, d, r)
	run(t, b.StartWebhook)
	srv := httptest.NewServer(b.WebhookHandler())
	t.Cleanup(srv.Close)

	var posts sync.WaitGroup
	for _, id := range ids() {
		for range 1 + id%2 {
			posts.Go(func() { tg.post(t, srv.URL, id, 3) })
		}
	}
	posts.Wait()
	require.Eventually(t, func() bool { return d.Stats().Waits == updates/2 },
		10*time.Second, time.Millisecond, "the second copies wait")
	close(r.gate)
	require.Eventually(t, func() bool { s := d.Stats(); return s.Processed+s.Failed == updates+1 },
		10*time.Second, time.Millisecond)

	for _, id := range ids() {
		assert.Equal(t, 1+id%2, tg.delivered(id), "deliveries of update %d", id)
	}
	assert.Equal(t, map[int]int{200: updates + updates/2}, tg.answers(), "every post answered 200 before the handler ran")
	assert.Equal(t, 1, r.of(10), "update 10 failed and was not posted again")
	assert.Equal(t, 2, r.of(5), "update 5 failed, and its copy waiting for it ran")
	assert.Len(t, e.list(), 2, "the errors handler: the handler's two errors, nothing else")
	s := d.Stats()
	t.Logf("go-telegram/bot webhook: %d updates, %d posts, all answered 200 at once; %d processed, %d failed (redelivered by Telegram: 0; run by a waiting copy: 1); copies in flight: %d waited; %d errors handled",
		updates, updates+updates/2, s.Processed, s.Failed, s.Waits, len(e.list()))
}

// TestHandlerInFlightIsNoError sends a copy while the first is processed, to
// a Handler whose wait ends first: the copy is dropped, and the errors
// handler hears nothing of it.
func TestHandlerInFlightIsNoError(t *testing.T) {
	d := dedupe.New(nil)
	r := newRuns(0)
	r.gate = make(chan struct{})
	e := &errs{}
	h := dedupegotelegram.Handler(d, "", r.handle, e.onError, dedupe.WithWait(time.Millisecond))
	u := &models.Update{ID: 1, Message: &models.Message{Text: "hi"}}

	var first sync.WaitGroup
	first.Go(func() { h(t.Context(), nil, u) })
	require.Eventually(t, func() bool { return r.of(1) == 1 }, 10*time.Second, time.Millisecond)
	h(t.Context(), nil, u) // the copy
	close(r.gate)
	first.Wait()

	assert.Equal(t, 1, r.of(1))
	assert.EqualValues(t, 1, d.Stats().InFlight)
	assert.Empty(t, e.list())
}
