package dedupetelebot_test

import (
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupetelebot"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	tele "gopkg.in/telebot.v3"
)

// runs is a text handler that counts its runs per update, fails every
// update whose id failEvery divides (on its first run only, if at all), and
// holds each run until gate is closed, if set.
type runs struct {
	failEvery int
	gate      chan struct{} // nil: do not hold

	mu     sync.Mutex
	counts map[int]int
	done   int
}

func newRuns(failEvery int) *runs { return &runs{failEvery: failEvery, counts: map[int]int{}} }

func (r *runs) handle(c tele.Context) error {
	id := c.Update().ID
	r.mu.Lock()
	r.counts[id]++
	first := r.counts[id] == 1
	r.mu.Unlock()
	if r.gate != nil {
		<-r.gate
	}
	defer func() {
		r.mu.Lock()
		r.done++
		r.mu.Unlock()
	}()
	if first && r.failEvery > 0 && id%r.failEvery == 0 {
		return errHandler
	}
	return nil
}

func (r *runs) finished() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

func (r *runs) of(id int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[id]
}

// startBot starts a bot with poller against tg, behind the middleware, and
// stops it at cleanup.
func startBot(t *testing.T, tg *telegram, poller tele.Poller, d *dedupe.Deduper, r *runs, opts ...dedupe.Option) *errs {
	t.Helper()
	e := &errs{}
	b, err := tele.NewBot(tele.Settings{URL: tg.srv.URL, Token: "123:token", Poller: poller, OnError: e.onError})
	require.NoError(t, err)
	b.Use(dedupetelebot.Middleware(d, "", opts...))
	b.Handle(tele.OnText, r.handle)
	started := make(chan struct{})
	go func() {
		close(started)
		b.Start()
	}()
	<-started
	t.Cleanup(b.Stop)
	return e
}

const updates = 10

func ids() []int {
	out := make([]int, updates)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// TestPollingFailureIsNotRedelivered polls the fake Telegram: every update
// is handed out once and runs once, and a failed one is released but never
// handed out again, since the poller's next getUpdates confirmed it.
func TestPollingFailureIsNotRedelivered(t *testing.T) {
	tg := newTelegram(t)
	d := dedupe.New(nil)
	r := newRuns(5)
	e := startBot(t, tg, &tele.LongPoller{Timeout: time.Second}, d, r)
	tg.add(ids()...)
	require.Eventually(t, func() bool { return r.finished() == updates }, 10*time.Second, time.Millisecond)
	tg.add(updates + 1) // the poll that hands it out has confirmed every earlier update
	require.Eventually(t, func() bool { return r.finished() == updates+1 }, 10*time.Second, time.Millisecond)

	for _, id := range ids() {
		assert.Equal(t, 1, tg.delivered(id), "deliveries of update %d", id)
		assert.Equal(t, 1, r.of(id), "runs of update %d", id)
	}
	assert.Len(t, e.list(), 2, "OnError: the two handler errors, nothing else")
	assert.EqualValues(t, 2, d.Stats().Failed, "released")
	t.Logf("polling: %d updates, 1 delivery and 1 run each; %d failed, released, redelivered 0 times", updates, d.Stats().Failed)
}

// TestPollingReplicasInFlight polls the fake Telegram with two replicas that
// share a Deduper, so that each gets every update, as when a replica starts
// while another has not confirmed its updates. The first copy of each update
// runs; the other, in flight, waits and is dropped without an error for
// OnError, whether the wait outlasts the first copy or not, and runs if the
// first copy failed: the one redelivery a polling bot gets.
func TestPollingReplicasInFlight(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []dedupe.Option
		failEvery int
		wantRuns  int // of each update whose first copy failed
		wantErrs  int
	}{
		{"default wait", nil, 0, 1, 0},
		{"default wait, failures", nil, 5, 2, 2},
		{"wait shorter than the first copy", []dedupe.Option{dedupe.WithWait(20 * time.Millisecond)}, 0, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tg := newTelegram(t)
			d := dedupe.New(nil)
			r := newRuns(tc.failEvery)
			r.gate = make(chan struct{})
			e1 := startBot(t, tg, &tele.LongPoller{Timeout: time.Second}, d, r, tc.opts...)
			e2 := startBot(t, tg, &tele.LongPoller{Timeout: time.Second}, d, r, tc.opts...)
			tg.add(ids()...)
			require.Eventually(t, func() bool { return d.Stats().Waits == updates },
				10*time.Second, time.Millisecond, "each update's second copy waits")
			if len(tc.opts) > 0 {
				require.Eventually(t, func() bool { return d.Stats().WaitsTimedOut == updates },
					10*time.Second, time.Millisecond, "and is still in flight after the wait")
			}
			close(r.gate)
			require.Eventually(t, func() bool {
				s := d.Stats()
				return s.Processed == updates && s.Processed+s.Failed+s.Duplicates+s.InFlight == 2*updates
			}, 10*time.Second, time.Millisecond)

			for _, id := range ids() {
				want := 1
				if tc.failEvery > 0 && id%tc.failEvery == 0 {
					want = tc.wantRuns
				}
				assert.Equal(t, 2, tg.delivered(id), "deliveries of update %d", id)
				assert.Equal(t, want, r.of(id), "runs of update %d", id)
			}
			assert.Len(t, append(e1.list(), e2.list()...), tc.wantErrs, "OnError: the handler errors, nothing else")
			s := d.Stats()
			t.Logf("polling, 2 replicas, %s: %d updates, 2 deliveries each; %d processed, %d failed and run again by the waiting copy; copies in flight: %d waited, %d duplicates, %d still in flight; %d errors for OnError",
				tc.name, updates, s.Processed, s.Failed, s.Waits, s.Duplicates, s.InFlight, len(e1.list())+len(e2.list()))
		})
	}
}

// TestWebhookFailureIsNotRedelivered serves telebot's own webhook to the
// fake Telegram, which posts each update, twice at once for half of them (a
// request repeated after a lost connection), and repeats any post not
// answered 2xx. telebot answers 200 before the handler runs: each post is
// answered 200, each update runs once, a failed one is never posted again,
// and a copy in flight is no error for OnError.
func TestWebhookFailureIsNotRedelivered(t *testing.T) {
	tg := newTelegram(t)
	d := dedupe.New(nil)
	r := newRuns(5)
	r.gate = make(chan struct{})
	addr := freeAddr(t)
	e := startBot(t, tg, stoppableWebhook{&tele.Webhook{Listen: addr,
		Endpoint: &tele.WebhookEndpoint{PublicURL: "http://" + addr}}}, d, r)
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the webhook listens")

	var posts sync.WaitGroup
	for _, id := range ids() {
		copies := 1 + id%2 // odd updates are posted twice at once
		for range copies {
			posts.Go(func() { tg.post(t, "http://"+addr, id, 3) })
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
	assert.Len(t, e.list(), 2, "OnError: the two handler errors, nothing else")
	s := d.Stats()
	t.Logf("telebot webhook: %d updates, %d posts, all answered 200 at once; %d processed, %d failed (redelivered by Telegram: 0; run by a waiting copy: 1); copies in flight: %d waited; %d errors for OnError",
		updates, updates+updates/2, s.Processed, s.Failed, s.Waits, len(e.list()))
}

// stoppableWebhook runs a [tele.Webhook] that [tele.Bot.Stop] can stop:
// telebot v3.3.8 closes the stop channel of its poller twice for a webhook
// (Bot.Start closes it, and Webhook.waitForStop closes it again on
// receiving), which panics. This one hands the webhook a channel of its own
// and sends on it instead.
type stoppableWebhook struct{ *tele.Webhook }

func (w stoppableWebhook) Poll(b *tele.Bot, dest chan tele.Update, stop chan struct{}) {
	inner, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		w.Webhook.Poll(b, dest, inner)
	}()
	<-stop
	select {
	case inner <- struct{}{}:
		<-done
	case <-done:
	}
}
