package dedupetgbotapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupetgbotapi"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

func (p *probe) handle(context.Context, tgbotapi.Update) error {
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

// telegram is a fake Telegram Bot API: getMe, and a getUpdates that long-polls
// a log of updates it never forgets, as Telegram keeps updates whose offset
// no call confirmed.
type telegram struct {
	mu      sync.Mutex
	updates []json.RawMessage
	added   chan struct{} // closed and renewed when an update is added
}

func newTelegram() *telegram { return &telegram{added: make(chan struct{})} }

func (tg *telegram) add(id int) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.updates = append(tg.updates, json.RawMessage(
		fmt.Sprintf(`{"update_id": %d, "message": {"message_id": %d, "text": "hi"}}`, id, id)))
	close(tg.added)
	tg.added = make(chan struct{})
}

// since returns the updates from offset on, and a channel closed when one is added.
func (tg *telegram) since(offset int) ([]json.RawMessage, <-chan struct{}) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var out []json.RawMessage
	for _, u := range tg.updates {
		var head struct {
			ID int `json:"update_id"`
		}
		if json.Unmarshal(u, &head) == nil && head.ID >= offset {
			out = append(out, u)
		}
	}
	return out, tg.added
}

// replica is one gateway process: its own bot client, polling the fake
// Telegram through a server of its own, so that it can be stopped alone.
type replica struct {
	api     *tgbotapi.BotAPI
	updates tgbotapi.UpdatesChannel
	stop    chan struct{}
	srv     *httptest.Server
}

func (tg *telegram) replica(t *testing.T) *replica {
	t.Helper()
	r := &replica{stop: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		switch {
		case strings.HasSuffix(req.URL.Path, "/getMe"):
			fmt.Fprint(w, `{"ok": true, "result": {"id": 1, "is_bot": true, "first_name": "bot", "username": "bot"}}`)
		case strings.HasSuffix(req.URL.Path, "/getUpdates"):
			offset, _ := strconv.Atoi(req.FormValue("offset"))
			for {
				ups, added := tg.since(offset)
				if len(ups) > 0 {
					json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": ups})
					return
				}
				select {
				case <-added:
				case <-r.stop:
					fmt.Fprint(w, `{"ok": true, "result": []}`)
					return
				}
			}
		default:
			http.NotFound(w, req)
		}
	}))
	api, err := tgbotapi.NewBotAPIWithClient("123:token", r.srv.URL+"/bot%s/%s", r.srv.Client())
	require.NoError(t, err)
	r.api = api
	r.updates = api.GetUpdatesChan(tgbotapi.NewUpdate(0))
	t.Cleanup(r.shutdown)
	return r
}

// shutdown stops the replica's polling goroutine and waits for it.
func (r *replica) shutdown() {
	select {
	case <-r.stop:
		return
	default:
	}
	r.api.StopReceivingUpdates()
	close(r.stop)
	for range r.updates {
	}
	r.srv.Close()
}

func update(id int) tgbotapi.Update {
	return tgbotapi.Update{UpdateID: id, Message: &tgbotapi.Message{MessageID: id, Text: "hi"}}
}

// TestHandlerRestartedReplica polls the fake Telegram for real: a replica
// processes an update and stops before its next poll confirms it, and the
// replica started after it gets the update again.
func TestHandlerRestartedReplica(t *testing.T) {
	tg := newTelegram()
	tg.add(1)
	p := newProbe()
	handle := dedupetgbotapi.Handler(dedupe.New(nil), "", p.handle)

	first := tg.replica(t)
	require.NoError(t, handle(t.Context(), <-first.updates))
	first.shutdown()

	second := tg.replica(t)
	u := <-second.updates
	assert.Equal(t, 1, u.UpdateID, "the restarted replica gets the update again")
	require.NoError(t, handle(t.Context(), u), "a duplicate is dropped, not an error")
	tg.add(2)
	require.NoError(t, handle(t.Context(), <-second.updates))
	assert.EqualValues(t, 2, p.calls.Load())
}

// webhook serves the SDK's webhook parser as ExampleHandler_webhook does:
// each update goes to handle, and the answer is StatusCode's.
func webhook(t *testing.T, api *tgbotapi.BotAPI, handle dedupetgbotapi.HandlerFunc) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := api.HandleUpdate(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(dedupetgbotapi.StatusCode(handle(r.Context(), *u)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func postUpdate(t *testing.T, url string, id int) int {
	t.Helper()
	resp, err := http.Post(url, "application/json",
		strings.NewReader(fmt.Sprintf(`{"update_id": %d, "message": {"message_id": %d, "text": "hi"}}`, id, id)))
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHandlerWebhookRetry serves the SDK's webhook parser: a failed update is
// answered 500, and Telegram's retry is processed once.
func TestHandlerWebhookRetry(t *testing.T) {
	p := newProbe()
	p.fail.Store(1)
	srv := webhook(t, newTelegram().replica(t).api, dedupetgbotapi.Handler(dedupe.New(nil), "", p.handle))

	var statuses []int
	for range 3 {
		statuses = append(statuses, postUpdate(t, srv.URL, 7))
	}
	assert.Equal(t, []int{500, 200, 200}, statuses)
	assert.EqualValues(t, 2, p.calls.Load(), "the retry after the failure is processed, the next one dropped")
}

// TestHandlerWebhookCopiesInFlight posts copies of an update while its first
// delivery is processed, as Telegram does after a lost connection: with the
// default wait each is answered with the first's outcome (200 if it
// succeeded; processed, then 200, if it failed), never 500; with a wait
// shorter than the first copy, 503.
func TestHandlerWebhookCopiesInFlight(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opts      []dedupe.Option
		fail      int32
		wantFirst int
		wantCopy  int // the answer of each copy
		wantCalls int32
	}{
		{"default wait, first succeeds", nil, 0, 200, 200, 1},
		{"default wait, first fails", nil, 1, 500, 200, 2},
		{"wait shorter than the first", []dedupe.Option{dedupe.WithWait(time.Millisecond)}, 0, 200, 503, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const copies = 8
			d := dedupe.New(nil)
			p := newProbe()
			p.hold = make(chan struct{})
			p.fail.Store(tc.fail)
			srv := webhook(t, newTelegram().replica(t).api, dedupetgbotapi.Handler(d, "", p.handle, tc.opts...))

			first := make(chan int, 1)
			go func() { first <- postUpdate(t, srv.URL, 7) }()
			<-p.entered
			answers := make(chan int, copies)
			for range copies {
				go func() { answers <- postUpdate(t, srv.URL, 7) }()
			}
			require.Eventually(t, func() bool { return d.Stats().Waits == copies },
				10*time.Second, time.Millisecond, "every copy waits")
			count := map[int]int{}
			if len(tc.opts) > 0 { // the copies' wait ends while the first runs
				for range copies {
					count[<-answers]++
				}
			}
			close(p.hold)
			assert.Equal(t, tc.wantFirst, <-first)
			if len(tc.opts) == 0 {
				for range copies {
					count[<-answers]++
				}
			}
			assert.Equal(t, map[int]int{tc.wantCopy: copies}, count)
			assert.Equal(t, tc.wantCalls, p.calls.Load())
			assert.False(t, p.overlapped.Load(), "two copies ran at once")
			t.Logf("tgbotapi webhook, %s: 1+%d posts of one update; first answered %d, copies %v; %d runs",
				tc.name, copies, tc.wantFirst, count, p.calls.Load())
		})
	}
}

func TestHandlerInFlight(t *testing.T) {
	p := newProbe()
	p.hold = make(chan struct{})
	handle := dedupetgbotapi.Handler(dedupe.New(nil), "", p.handle, dedupe.WithWait(time.Millisecond))

	done := make(chan error)
	go func() { done <- handle(t.Context(), update(1)) }()
	<-p.entered
	err := handle(t.Context(), update(1))
	assert.ErrorIs(t, err, dedupe.ErrInFlight)
	assert.Equal(t, http.StatusServiceUnavailable, dedupetgbotapi.StatusCode(err))
	close(p.hold)
	require.NoError(t, <-done)
	assert.EqualValues(t, 1, p.calls.Load())
}

// TestHandlerWait runs concurrent copies while the first is held, through a
// Handler whose Deduper waits for the owner: they never run beside it, and
// they run after it only if it failed.
func TestHandlerWait(t *testing.T) {
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
			handle := dedupetgbotapi.Handler(d, "", p.handle, dedupe.WithWait(time.Minute))

			var wg sync.WaitGroup
			var failed atomic.Int32
			run := func() {
				if handle(t.Context(), update(1)) != nil {
					failed.Add(1)
				}
			}
			wg.Go(run)
			<-p.entered
			for range copies {
				wg.Go(run)
			}
			require.Eventually(t, func() bool { return d.Stats().Waits == copies },
				10*time.Second, time.Millisecond, "every copy waits for the owner")
			close(p.hold)
			wg.Wait()

			assert.Equal(t, tc.wantCalls, p.calls.Load())
			assert.Equal(t, tc.fail, failed.Load(), "only the failed handler's call returns an error")
			assert.False(t, p.overlapped.Load(), "two copies ran at once")
		})
	}
}

func TestHandlerTwoBotsShareAStore(t *testing.T) {
	d := dedupe.New(nil)
	pa, pb := newProbe(), newProbe()
	a := dedupetgbotapi.Handler(d, "telegram-a", pa.handle)
	b := dedupetgbotapi.Handler(d, "telegram-b", pb.handle)
	for range 2 {
		require.NoError(t, a(t.Context(), update(1)))
		require.NoError(t, b(t.Context(), update(1)))
	}
	assert.EqualValues(t, 1, pa.calls.Load())
	assert.EqualValues(t, 1, pb.calls.Load(), "bot b's update 1 is not bot a's")
}

func TestHandlerUpdateWithoutID(t *testing.T) {
	p := newProbe()
	handle := dedupetgbotapi.Handler(dedupe.New(nil), "", p.handle)
	require.NoError(t, handle(t.Context(), update(0)))
	require.NoError(t, handle(t.Context(), update(0)))
	assert.EqualValues(t, 2, p.calls.Load(), "no id, no deduplication")
}

// TestHandlerErrorWrappingErrDuplicate checks that a handler's own error is
// returned even when it wraps dedupe.ErrDuplicate.
func TestHandlerErrorWrappingErrDuplicate(t *testing.T) {
	own := fmt.Errorf("inner step: %w", dedupe.ErrDuplicate)
	handle := dedupetgbotapi.Handler(dedupe.New(nil), "", func(context.Context, tgbotapi.Update) error { return own })
	assert.Same(t, own, handle(t.Context(), update(1)))
}

// TestHandlerPollingFailure polls the fake Telegram: a failed update is
// released, but the poller, whose offset moved past it, does not get it
// again; a replica restarted before its next poll confirmed the update
// fetches it again and processes it.
func TestHandlerPollingFailure(t *testing.T) {
	tg := newTelegram()
	tg.add(1)
	p := newProbe()
	p.fail.Store(1)
	handle := dedupetgbotapi.Handler(dedupe.New(nil), "", p.handle)

	first := tg.replica(t)
	require.ErrorIs(t, handle(t.Context(), <-first.updates), errHandler)
	tg.add(2)
	u := <-first.updates
	assert.Equal(t, 2, u.UpdateID, "the running poller does not get the released update again")
	require.NoError(t, handle(t.Context(), u))
	first.shutdown()

	second := tg.replica(t) // restarted, from the last confirmed offset
	for range 2 {
		require.NoError(t, handle(t.Context(), <-second.updates))
	}
	assert.EqualValues(t, 3, p.calls.Load(), "update 1 twice (failed, then processed after the restart), update 2 once")
}
