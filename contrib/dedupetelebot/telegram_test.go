package dedupetelebot_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// telegram is a fake Telegram Bot API. For polling it serves getMe and a
// getUpdates that long-polls a log of updates it never forgets, counting
// each update it hands out; for a webhook it accepts setWebhook and posts
// each update to the webhook's URL, repeating a post that failed or was not
// answered 2xx, as Telegram does, and counting the posts.
type telegram struct {
	srv *httptest.Server

	mu         sync.Mutex
	updates    []json.RawMessage
	added      chan struct{} // closed and renewed when an update is added
	deliveries map[int]int   // update id: times handed out or posted
	statuses   map[int]int   // HTTP status: webhook answers
	stop       chan struct{}
}

func newTelegram(t *testing.T) *telegram {
	tg := &telegram{added: make(chan struct{}), deliveries: map[int]int{},
		statuses: map[int]int{}, stop: make(chan struct{})}
	tg.srv = httptest.NewServer(http.HandlerFunc(tg.serve))
	t.Cleanup(func() {
		close(tg.stop)
		tg.srv.Close()
	})
	return tg
}

func telegramUpdate(id int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(
		`{"update_id": %d, "message": {"message_id": %d, "date": 1700000000, "chat": {"id": 1, "type": "private"}, "text": "hi"}}`, id, id))
}

// add appends updates to the log, for getUpdates to hand out.
func (tg *telegram) add(ids ...int) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for _, id := range ids {
		tg.updates = append(tg.updates, telegramUpdate(id))
	}
	close(tg.added)
	tg.added = make(chan struct{})
}

func (tg *telegram) serve(w http.ResponseWriter, r *http.Request) {
	method := r.URL.Path[strings.LastIndex(r.URL.Path, "/")+1:]
	switch method {
	case "getMe":
		fmt.Fprint(w, `{"ok": true, "result": {"id": 1, "is_bot": true, "first_name": "bot", "username": "bot"}}`)
	case "setWebhook", "deleteWebhook":
		fmt.Fprint(w, `{"ok": true, "result": true}`)
	case "getUpdates":
		var params struct {
			Offset  string `json:"offset"`
			Timeout string `json:"timeout"`
		}
		_ = json.NewDecoder(r.Body).Decode(&params)
		offset, _ := strconv.Atoi(params.Offset)
		timeout, _ := strconv.Atoi(params.Timeout)
		tg.getUpdates(w, r, offset, timeout)
	default:
		http.NotFound(w, r)
	}
}

// getUpdates answers with the updates from offset on, once there are any,
// or with none after timeout seconds, as Telegram's long polling does.
func (tg *telegram) getUpdates(w http.ResponseWriter, r *http.Request, offset, timeout int) {
	expired := time.After(time.Duration(timeout) * time.Second)
	for {
		ups, added := tg.since(offset)
		if len(ups) > 0 {
			_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "result": ups})
			return
		}
		select {
		case <-added:
		case <-r.Context().Done():
			return
		case <-expired:
			fmt.Fprint(w, `{"ok": true, "result": []}`)
			return
		case <-tg.stop:
			fmt.Fprint(w, `{"ok": true, "result": []}`)
			return
		}
	}
}

// since returns the updates from offset on, counting them as delivered, and
// a channel closed when one is added.
func (tg *telegram) since(offset int) ([]json.RawMessage, <-chan struct{}) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var out []json.RawMessage
	for i, u := range tg.updates {
		if id := i + 1; id >= offset { // the log holds updates 1, 2, …
			out = append(out, u)
			tg.deliveries[id]++
		}
	}
	return out, tg.added
}

// post delivers update id to the webhook at url until it is answered 2xx, at
// most tries times, and records the answers (0 for a post not answered).
func (tg *telegram) post(t *testing.T, url string, id, tries int) {
	t.Helper()
	body := telegramUpdate(id)
	for range tries {
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		status := 0 // no answer
		if err == nil {
			resp.Body.Close()
			status = resp.StatusCode
		}
		tg.mu.Lock()
		tg.deliveries[id]++
		tg.statuses[status]++
		tg.mu.Unlock()
		if resp.StatusCode/100 == 2 {
			return
		}
	}
}

func (tg *telegram) delivered(id int) int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return tg.deliveries[id]
}

func (tg *telegram) answers() map[int]int {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	out := map[int]int{}
	for k, v := range tg.statuses {
		out[k] = v
	}
	return out
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}
