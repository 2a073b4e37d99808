package dedupeslack_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupeslack"
	"github.com/gorilla/websocket"
	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeSlack is Slack's side of Socket Mode: apps.connections.open, and a
// WebSocket that says hello, carries the envelopes the test sends and reports
// the acknowledgements it reads. An app runs against it with slack-go's own
// client and SocketmodeHandler.
type fakeSlack struct {
	srv       *httptest.Server
	connected chan struct{}
	acks      chan string // envelope ids acknowledged, in order
	handled   chan string // envelope ids whose handler returned, in any order

	mu   sync.Mutex
	conn *websocket.Conn
}

// newSlack starts a fake Slack and an app connected to it whose handler for
// message events is the wrapper SocketMode(d, channel, p, opts...). Cleanup
// stops the app and waits for it.
func newSlack(t *testing.T, d *dedupe.Deduper, channel string, p *probe, opts ...dedupe.Option) *fakeSlack {
	t.Helper()
	fs := &fakeSlack{connected: make(chan struct{}), acks: make(chan string, 64), handled: make(chan string, 64)}
	fs.srv = httptest.NewServer(http.HandlerFunc(fs.serve))
	t.Cleanup(fs.srv.Close)

	api := slack.New("xoxb-test", slack.OptionAppLevelToken("xapp-test"), slack.OptionAPIURL(fs.srv.URL+"/api/"))
	client := socketmode.New(api, socketmode.OptionLog(log.New(io.Discard, "", 0)),
		socketmode.OptionPingInterval(time.Hour)) // the fake sends no pings
	wrapped := dedupeslack.SocketMode(d, channel, func(*socketmode.Event, *socketmode.Client) error { return p.run() }, opts...)
	h := socketmode.NewSocketmodeHandler(client)
	h.HandleDefault(func(*socketmode.Event, *socketmode.Client) {}) // hello, connecting, connected
	h.HandleEvents(slackevents.Message, func(evt *socketmode.Event, c *socketmode.Client) {
		wrapped(evt, c)
		fs.handled <- evt.Request.EnvelopeID
	})

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- h.RunEventLoopContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
	select {
	case <-fs.connected:
	case <-time.After(10 * time.Second):
		require.Fail(t, "the app did not connect")
	}
	return fs
}

func (fs *fakeSlack) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/api/apps.connections.open":
		fmt.Fprintf(w, `{"ok": true, "url": "ws%s/link"}`, strings.TrimPrefix(fs.srv.URL, "http"))
	case "/link":
		// slack-go dials with the Origin Slack's own server expects.
		up := websocket.Upgrader{CheckOrigin: func(r *http.Request) bool {
			return r.Header.Get("Origin") == "https://api.slack.com"
		}}
		conn, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer conn.Close()
		if conn.WriteJSON(map[string]any{"type": "hello", "num_connections": 1}) != nil {
			return
		}
		fs.mu.Lock()
		fs.conn = conn
		fs.mu.Unlock()
		close(fs.connected)
		for {
			var resp struct {
				EnvelopeID string `json:"envelope_id"`
			}
			if conn.ReadJSON(&resp) != nil {
				return
			}
			fs.acks <- resp.EnvelopeID
		}
	default:
		http.NotFound(w, r)
	}
}

// send delivers eventID in the envelope envelopeID, as Slack's retry number
// attempt.
func (fs *fakeSlack) send(t *testing.T, envelopeID, eventID string, attempt int) {
	t.Helper()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	require.NoError(t, fs.conn.WriteJSON(map[string]any{
		"envelope_id":   envelopeID,
		"type":          "events_api",
		"retry_attempt": attempt,
		"payload":       json.RawMessage(callback(eventID)),
	}))
}

func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(10 * time.Second):
		require.Failf(t, "timed out", "no %s", what)
		return ""
	}
}

func (fs *fakeSlack) nextAck(t *testing.T) string { return receive(t, fs.acks, "acknowledgement") }
func (fs *fakeSlack) nextHandled(t *testing.T) string {
	return receive(t, fs.handled, "handler return")
}

// TestSocketModeRetries fails the first delivery: it is not acknowledged, and
// Slack's retry is processed and acknowledged; the next retry is a duplicate,
// acknowledged without running the handler.
func TestSocketModeRetries(t *testing.T) {
	p := newProbe()
	p.fail.Store(1)
	fs := newSlack(t, dedupe.New(nil), "", p)

	fs.send(t, "env-1", "Ev1", 0)
	assert.Equal(t, "env-1", fs.nextHandled(t))
	fs.send(t, "env-2", "Ev1", 1)
	assert.Equal(t, "env-2", fs.nextHandled(t))
	assert.Equal(t, "env-2", fs.nextAck(t), "the failed envelope was acknowledged")
	fs.send(t, "env-3", "Ev1", 2)
	assert.Equal(t, "env-3", fs.nextHandled(t))
	assert.Equal(t, "env-3", fs.nextAck(t))
	assert.EqualValues(t, 2, p.calls.Load())
}

// TestSocketModeInFlight sends a retry while the first delivery is processed,
// to a handler whose wait ends first: it is left unacknowledged, for Slack to
// send again.
func TestSocketModeInFlight(t *testing.T) {
	p := newProbe()
	p.hold = make(chan struct{})
	fs := newSlack(t, dedupe.New(nil), "", p, dedupe.WithWait(time.Millisecond))

	fs.send(t, "env-1", "Ev1", 0)
	<-p.entered
	fs.send(t, "env-2", "Ev1", 1)
	assert.Equal(t, "env-2", fs.nextHandled(t))
	close(p.hold)
	assert.Equal(t, "env-1", fs.nextHandled(t))
	assert.Equal(t, "env-1", fs.nextAck(t), "the retry in flight was acknowledged")
	fs.send(t, "env-3", "Ev1", 2)
	assert.Equal(t, "env-3", fs.nextHandled(t))
	assert.Equal(t, "env-3", fs.nextAck(t))
	assert.EqualValues(t, 1, p.calls.Load())
}

// TestSocketModeWait sends retries while the first delivery is held, to a
// handler with the default wait (platform.Slack's AckBudget): they never run
// beside it, they run after it only if it failed, and every envelope but a
// failed one is acknowledged.
func TestSocketModeWait(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fail      int32
		wantCalls int32
		wantAcks  int
	}{
		{"owner succeeds", 0, 1, 4},
		{"owner fails", 1, 2, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const retries = 3
			d := dedupe.New(nil)
			p := newProbe()
			p.hold = make(chan struct{})
			p.fail.Store(tc.fail)
			fs := newSlack(t, d, "", p)

			fs.send(t, "env-0", "Ev1", 0)
			<-p.entered
			for i := 1; i <= retries; i++ {
				fs.send(t, fmt.Sprintf("env-%d", i), "Ev1", i)
			}
			require.Eventually(t, func() bool { return d.Stats().Waits == retries },
				10*time.Second, time.Millisecond, "every retry waits for the owner")
			close(p.hold)
			for range retries + 1 {
				fs.nextHandled(t)
			}
			acked := map[string]bool{}
			for range tc.wantAcks {
				acked[fs.nextAck(t)] = true
			}
			assert.Len(t, acked, tc.wantAcks)
			assert.Equal(t, tc.fail == 0, acked["env-0"], "the owner's envelope is acknowledged if it succeeded")
			assert.Equal(t, tc.wantCalls, p.calls.Load())
			assert.False(t, p.overlapped.Load(), "two copies ran at once")
			t.Logf("Socket Mode, %s: 1+%d envelopes of one event; %d acknowledged; %d runs",
				tc.name, retries, len(acked), p.calls.Load())
		})
	}
}

func TestSocketModeTwoAppsShareAStore(t *testing.T) {
	d := dedupe.New(nil)
	pa, pb := newProbe(), newProbe()
	a := newSlack(t, d, "slack-a", pa)
	b := newSlack(t, d, "slack-b", pb)
	for i, fs := range []*fakeSlack{a, b, a, b} {
		env := fmt.Sprintf("env-%d", i)
		fs.send(t, env, "Ev1", 0)
		assert.Equal(t, env, fs.nextHandled(t))
		assert.Equal(t, env, fs.nextAck(t))
	}
	assert.EqualValues(t, 1, pa.calls.Load())
	assert.EqualValues(t, 1, pb.calls.Load(), "app b's Ev1 is not app a's")
}
