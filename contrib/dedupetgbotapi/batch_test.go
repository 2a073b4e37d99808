package dedupetgbotapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupetgbotapi"
	tgbotapi "github.com/go-telegram-bot-api/telegram-bot-api/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// botAPI is a fake Telegram Bot API server for getUpdates, following its
// offset rules (Bot API, getUpdates, https://core.telegram.org/bots/api#getupdates):
// a call returns up to limit (1-100, default 100) of the updates kept,
// starting from offset, or from the earliest unconfirmed one if offset is 0;
// a call with an offset confirms, and forgets, every update whose update_id
// is lower. A batch whose updates were not confirmed is thus returned again
// by the next call with the same offset.
type botAPI struct {
	mu      sync.Mutex
	kept    []int // update_ids not confirmed, ascending
	offsets []int // the offset of each getUpdates call
	srv     *httptest.Server
}

func newBotAPI(t *testing.T, first, n int) *botAPI {
	b := &botAPI{}
	for id := first; id < first+n; id++ {
		b.kept = append(b.kept, id)
	}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *botAPI) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case strings.HasSuffix(r.URL.Path, "/getMe"):
		fmt.Fprint(w, `{"ok": true, "result": {"id": 1, "is_bot": true, "first_name": "bot", "username": "bot"}}`)
	case strings.HasSuffix(r.URL.Path, "/getUpdates"):
		offset, _ := strconv.Atoi(r.FormValue("offset"))
		limit, err := strconv.Atoi(r.FormValue("limit"))
		if err != nil || limit < 1 || limit > 100 {
			limit = 100
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.offsets = append(b.offsets, offset)
		for len(b.kept) > 0 && b.kept[0] < offset {
			b.kept = b.kept[1:] // confirmed: forgotten
		}
		var result []json.RawMessage
		for _, id := range b.kept[:min(limit, len(b.kept))] {
			result = append(result, json.RawMessage(fmt.Sprintf(
				`{"update_id": %d, "message": {"message_id": %d, "date": 1700000000, "chat": {"id": 7, "type": "private"}, "text": "hi %d"}}`, id, id, id)))
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": result})
	default:
		http.NotFound(w, r)
	}
}

func (b *botAPI) client(t *testing.T) *tgbotapi.BotAPI {
	api, err := tgbotapi.NewBotAPIWithClient("123:token", b.srv.URL+"/bot%s/%s", b.srv.Client())
	require.NoError(t, err)
	return api
}

func (b *botAPI) calls() (offsets []int, kept int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.offsets...), len(b.kept)
}

// runs counts the handler's runs and successes per update, failing the
// first run of the updates in fail.
type runs struct {
	mu        sync.Mutex
	ran, done map[int]int
	fail      map[int]bool
}

func newRuns(fail ...int) *runs {
	r := &runs{ran: map[int]int{}, done: map[int]int{}, fail: map[int]bool{}}
	for _, id := range fail {
		r.fail[id] = true
	}
	return r
}

func (r *runs) handle(_ context.Context, u tgbotapi.Update) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ran[u.UpdateID]++
	if r.fail[u.UpdateID] && r.ran[u.UpdateID] == 1 {
		return errors.New("the model timed out")
	}
	r.done[u.UpdateID]++
	return nil
}

// pollUntil polls api with run until the fake has confirmed every update.
func pollUntil(t *testing.T, b *botAPI, run dedupetgbotapi.BatchFunc) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for {
			if _, kept := b.calls(); kept == 0 {
				cancel()
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	cfg := tgbotapi.NewUpdate(0)
	done := make(chan error, 1)
	go func() { done <- dedupetgbotapi.Poll(ctx, b.client(t), cfg, run, 10*time.Millisecond) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(60 * time.Second):
		t.Fatal("updates left unconfirmed")
	}
}

// A poller over 250 updates in batches of 100 whose handler fails update
// 1042 once: the offset stops at 1042, the next call fetches 1042 again with
// the 57 updates after it in that batch, which run as duplicates; every
// update succeeds once and Telegram ends with none kept.
func TestPollFailureFetchedAgain(t *testing.T) {
	store, err := dedupe.OpenSQLite(filepath.Join(t.TempDir(), "marks.db"), dedupe.SQLiteConfig{})
	require.NoError(t, err)
	defer store.Close()
	d := dedupe.New(store)
	defer d.Close()
	b := newBotAPI(t, 1000, 250)
	r := newRuns(1042)
	pollUntil(t, b, dedupetgbotapi.Batch(d, "tg-poll", r.handle))

	offsets, _ := b.calls()
	require.GreaterOrEqual(t, len(offsets), 4)
	assert.Equal(t, []int{0, 1042, 1142, 1242}, offsets[:4], "the offsets asked: the failed update's, then past each batch")
	for id := 1000; id < 1250; id++ {
		assert.Equal(t, 1, r.done[id], "successes of update %d", id)
		want := 1
		if id == 1042 {
			want = 2
		}
		assert.Equal(t, want, r.ran[id], "runs of update %d", id)
	}
	assert.Equal(t, uint64(1099-1042), d.Stats().Duplicates, "the updates after 1042 of its batch, fetched again")
}

// A poller that stops after running a batch, before its next call confirmed
// it, leaves the batch to the process started after it: that one fetches it
// again from the earliest unconfirmed update, and drops it as duplicates.
func TestPollRestartFetchesAgain(t *testing.T) {
	d := dedupe.New(nil)
	defer d.Close()
	b := newBotAPI(t, 500, 30)
	r := newRuns()
	run := dedupetgbotapi.Batch(d, "tg-restart", r.handle)

	updates, err := b.client(t).GetUpdates(tgbotapi.NewUpdate(0)) // the first process
	require.NoError(t, err)
	next, errs := run(t.Context(), updates)
	assert.Equal(t, 530, next)
	for _, err := range errs {
		assert.NoError(t, err)
	}

	pollUntil(t, b, run) // the restarted process, from offset 0
	offsets, _ := b.calls()
	assert.Equal(t, []int{0, 0, 530}, offsets[:3])
	for id := 500; id < 530; id++ {
		assert.Equal(t, 1, r.ran[id], "runs of update %d", id)
	}
	assert.Equal(t, uint64(30), d.Stats().Duplicates)
}

// The offset a batch returns, update by update.
func TestBatchOffset(t *testing.T) {
	d := dedupe.New(nil)
	defer d.Close()
	ups := func(ids ...int) []tgbotapi.Update {
		out := make([]tgbotapi.Update, len(ids))
		for i, id := range ids {
			out[i] = update(id)
		}
		return out
	}
	r := newRuns(12, 21)
	run := dedupetgbotapi.Batch(d, "tg-offset", r.handle)
	for _, tc := range []struct {
		name    string
		updates []tgbotapi.Update
		want    int
	}{
		{"empty: keep yours", nil, 0},
		{"all processed", ups(1, 2, 3), 4},
		{"all duplicates", ups(1, 2, 3), 4},
		{"a failure stops it", ups(10, 11, 12, 13), 12},
		{"fetched again", ups(12, 13, 14), 15},
		{"first fails", ups(21, 22), 21},
		{"out of order", ups(31, 30), 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, errs := run(t.Context(), tc.updates)
			assert.Equal(t, tc.want, next)
			assert.Len(t, errs, len(tc.updates))
		})
	}
}
