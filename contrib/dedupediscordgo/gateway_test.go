package dedupediscordgo_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/require"
)

// gateway is a fake Discord gateway: the REST call for its URL, and a
// WebSocket that says hello, answers IDENTIFY with READY and RESUME with
// RESUMED, acknowledges heartbeats and dispatches the events the test sends.
// On RESUME it replays every event of the session, as a gateway whose replay
// overlaps what the client had already received.
type gateway struct {
	srv     *httptest.Server
	ready   chan string // "READY" or "RESUMED", once per connection
	mu      sync.Mutex
	conn    *websocket.Conn
	seq     int64
	history []dispatch
}

type dispatch struct {
	Op   int             `json:"op"`
	Type string          `json:"t"`
	Seq  int64           `json:"s"`
	Data json.RawMessage `json:"d"`
}

func newGateway(t *testing.T) *gateway {
	g := &gateway{ready: make(chan string, 4)}
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	t.Cleanup(g.srv.Close)
	return g
}

// session returns a discordgo session whose REST and WebSocket calls reach g
// only, opened. Cleanup closes it.
func (g *gateway) session(t *testing.T, handlers ...any) *discordgo.Session {
	t.Helper()
	s, err := discordgo.New("Bot test-token")
	require.NoError(t, err)
	s.Client = &http.Client{Transport: redirect{to: g.srv.URL}}
	for _, h := range handlers {
		s.AddHandler(h)
	}
	require.NoError(t, s.Open())
	t.Cleanup(func() { _ = s.Close() })
	require.Equal(t, "READY", g.wait(t))
	return s
}

// redirect sends every request to the fake gateway's server.
type redirect struct{ to string }

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	u, err := url.Parse(r.to)
	if err != nil {
		return nil, err
	}
	req = req.Clone(req.Context())
	req.URL.Scheme, req.URL.Host = u.Scheme, u.Host
	return http.DefaultTransport.RoundTrip(req)
}

func (g *gateway) serve(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		if strings.HasSuffix(r.URL.Path, "/gateway") {
			fmt.Fprintf(w, `{"url": "ws%s"}`, strings.TrimPrefix(g.srv.URL, "http"))
			return
		}
		http.NotFound(w, r)
		return
	}
	conn, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	g.mu.Lock()
	err = conn.WriteJSON(map[string]any{"op": 10, "d": map[string]any{"heartbeat_interval": 45000}})
	g.mu.Unlock()
	if err != nil {
		return
	}
	for {
		var msg struct {
			Op int `json:"op"`
		}
		if conn.ReadJSON(&msg) != nil {
			return
		}
		switch msg.Op {
		case 1: // heartbeat
			g.write(conn, map[string]any{"op": 11})
		case 2: // identify
			g.open(conn, "READY", `{"v": 10, "session_id": "session-1", "user": {"id": "1", "username": "bot"}, "guilds": []}`, false)
		case 6: // resume
			g.open(conn, "RESUMED", `{}`, true)
		}
	}
}

func (g *gateway) write(conn *websocket.Conn, v any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_ = conn.WriteJSON(v)
}

// open makes conn the connection that dispatches go to, sends the READY or
// RESUMED event, and after RESUMED replays the session's history.
func (g *gateway) open(conn *websocket.Conn, event, data string, replay bool) {
	g.mu.Lock()
	g.conn = conn
	g.seq++
	_ = conn.WriteJSON(dispatch{Type: event, Seq: g.seq, Data: json.RawMessage(data)})
	if replay {
		for _, d := range g.history {
			_ = conn.WriteJSON(d)
		}
	}
	g.mu.Unlock()
	g.ready <- event
}

func (g *gateway) wait(t *testing.T) string {
	t.Helper()
	select {
	case e := <-g.ready:
		return e
	case <-time.After(20 * time.Second):
		require.Fail(t, "the session did not connect")
		return ""
	}
}

// send dispatches an event of type typ with data to the open connection.
func (g *gateway) send(t *testing.T, typ, data string) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.seq++
	d := dispatch{Type: typ, Seq: g.seq, Data: json.RawMessage(data)}
	g.history = append(g.history, d)
	require.NoError(t, g.conn.WriteJSON(d))
}

// drop closes the open connection from the gateway's side, as a network
// failure does; the session reconnects and resumes.
func (g *gateway) drop() {
	g.mu.Lock()
	defer g.mu.Unlock()
	_ = g.conn.Close()
}

func message(id string) string {
	return fmt.Sprintf(`{"id": %q, "channel_id": "100", "guild_id": "200", "content": "hi",
		"author": {"id": "300", "username": "user"}}`, id)
}

func interaction(id string) string {
	return fmt.Sprintf(`{"id": %q, "application_id": "1", "type": 2, "token": "interaction-token", "version": 1,
		"channel_id": "100", "data": {"id": "400", "name": "ping", "type": 1}}`, id)
}
