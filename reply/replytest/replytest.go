// Package replytest is a fake chat platform API for tests of replies: it
// serves the send-message calls of LINE, Discord, Feishu and Telegram on a
// loopback port, honours their idempotency tokens as each platform documents
// them, injects faults (a send accepted whose answer never comes, a 5xx after
// or before accepting, a proxy's HTML 502 after accepting, a 4xx, a 429),
// survives a restart with its messages kept, and
// counts the messages delivered per chat and text, so that a test can assert
// that no reply was sent twice and none was lost.
//
// The calls it serves, with the token each honours:
//
//   - LINE, POST /v2/bot/message/push with the X-Line-Retry-Key header: the
//     first request with a key is accepted (200, an X-Line-Request-Id); a
//     request with a key accepted within 24 hours gets 409 with
//     X-Line-Accepted-Request-Id and sends nothing
//     (https://developers.line.biz/en/docs/messaging-api/retrying-api-request/).
//     A key that is not a UUID is refused with 400.
//   - Discord, POST /api/v10/channels/{channel}/messages with nonce and
//     enforce_nonce: true: "it will be checked for uniqueness in the past
//     few minutes. If another message was created by the same author with the
//     same nonce, that message will be returned and no new message will be
//     created" (https://discord.com/developers/docs/resources/message#create-message).
//     A nonce over 25 characters is refused with 400.
//   - Feishu, POST /open-apis/im/v1/messages?receive_id_type=chat_id with
//     the uuid field: requests with the same uuid send at most one message
//     within an hour; a repeat is answered with the first message
//     (https://open.feishu.cn/document/server-docs/im-v1/message/create). A
//     uuid over 50 characters is refused with 400.
//   - Telegram, POST /bot{token}/sendMessage, with a JSON, form-encoded or
//     multipart body as the Bot API takes them: no token, every accepted
//     call is a message (https://core.telegram.org/bots/api#sendmessage).
//     /bot{token}/getMe, which the Bot API's clients call at start, is
//     answered with a bot and is not a send call: no fault, not counted
//     (https://core.telegram.org/bots/api#getme).
//
// The author (Discord) or app (Feishu) a token is scoped to is the request's
// Authorization header. A Server is safe for concurrent use.
//
// [Client] makes these calls in their real shapes; [RunTelegram] tests a
// Telegram client library's send against a Server.
package replytest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"time"
)

// The platforms a [Server] serves, as [Message.Platform] names them.
const (
	LINE     = "line"
	Discord  = "discord"
	Feishu   = "feishu"
	Telegram = "telegram"
)

// A Fault is what the server does with one send call.
type Fault int

const (
	// OK accepts the call and answers it as the platform does.
	OK Fault = iota
	// Hang accepts the call (the message is delivered, or the token's first
	// message kept) and never answers: the client times out. A restart drops
	// the connection.
	Hang
	// FailAfter accepts the call, then answers 500.
	FailAfter
	// FailBefore answers 503 without accepting the call: nothing is
	// delivered, the token is not taken.
	FailBefore
	// Reject answers 400 without accepting the call (Telegram: "Bad
	// Request: chat not found", a description its clients recognise).
	Reject
	// Throttle answers 429 without accepting the call, with Retry-After: 5
	// (for Telegram, parameters.retry_after 5 in the body).
	Throttle
	// BadGateway accepts the call, then answers 502 with an HTML page, as a
	// proxy in front of the platform does: the body is not the platform's.
	BadGateway
)

// String returns the fault's name.
func (f Fault) String() string {
	switch f {
	case OK:
		return "ok"
	case Hang:
		return "hang"
	case FailAfter:
		return "5xx-after-accepting"
	case FailBefore:
		return "5xx-before-accepting"
	case Reject:
		return "4xx"
	case Throttle:
		return "429"
	case BadGateway:
		return "html-502-after-accepting"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Odds are the probabilities of each fault for a call no queued fault
// ([Server.Next]) decides; what is left of 1 is [OK].
type Odds struct {
	Hang, FailAfter, FailBefore, Reject, Throttle, BadGateway float64
}

// Config configures a [Server]. Its zero value is usable.
type Config struct {
	// Now is the clock of the tokens' windows (default time.Now).
	Now func() time.Time
	// LINEWindow, DiscordWindow and FeishuWindow are how long each platform
	// honours a token: default 24 hours, 3 minutes ("a few minutes") and one
	// hour.
	LINEWindow, DiscordWindow, FeishuWindow time.Duration
	// Odds are the faults' probabilities (default none).
	Odds Odds
	// Seed seeds the draws of Odds (default 1).
	Seed uint64
	// Notify, if not nil, is called with each call's fault once the call is
	// accepted or refused, before it hangs or is answered.
	Notify func(Fault)
}

// Message is one message the platform delivered.
type Message struct {
	Platform, Chat, Text string
	Token                string // the idempotency token of the call that sent it ("" if none)
	ID                   string // the platform's id of the message
	At                   time.Time
}

// Stats counts what a [Server] did.
type Stats struct {
	Calls     int           // send calls received
	Delivered int           // messages delivered
	Repeats   int           // calls answered with an earlier message of their token (LINE: 409)
	Faults    map[Fault]int // calls per fault injected
	Restarts  int
}

// Server is the fake platform. It is an [http.Handler]; [Server.Start]
// serves it on a loopback port.
type Server struct {
	cfg Config

	mu       sync.Mutex
	rng      *rand.Rand
	queue    []Fault
	msgs     []Message
	count    map[[2]string]int // (chat, text) -> messages
	tokens   map[string]first  // platform, scope and token -> its first message
	seq      int64
	stats    Stats
	released chan struct{} // closed by a restart: hung calls end
	ts       *httptest.Server
	mux      *http.ServeMux
}

// first is a token's first accepted call.
type first struct {
	id, request string
	at          time.Time
}

// New returns a Server, not serving yet.
func New(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.LINEWindow <= 0 {
		cfg.LINEWindow = 24 * time.Hour
	}
	if cfg.DiscordWindow <= 0 {
		cfg.DiscordWindow = 3 * time.Minute
	}
	if cfg.FeishuWindow <= 0 {
		cfg.FeishuWindow = time.Hour
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	s := &Server{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		count: map[[2]string]int{}, tokens: map[string]first{}, released: make(chan struct{}),
		stats: Stats{Faults: map[Fault]int{}}}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v2/bot/message/push", s.line)
	s.mux.HandleFunc("POST /api/v10/channels/{channel}/messages", s.discord)
	s.mux.HandleFunc("POST /open-apis/im/v1/messages", s.feishu)
	s.mux.HandleFunc("POST /{bot}/sendMessage", s.telegram)
	s.mux.HandleFunc("/{bot}/getMe", s.telegramGetMe)
	return s
}

// ServeHTTP serves the platforms' send calls.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Start serves s on a loopback port and returns its base URL.
func (s *Server) Start() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("replytest: %w", err)
	}
	s.serve(ln)
	return s.URL(), nil
}

// serve serves s on ln.
func (s *Server) serve(ln net.Listener) {
	ts := httptest.NewUnstartedServer(s)
	_ = ts.Listener.Close()
	ts.Listener = ln
	ts.Start()
	s.mu.Lock()
	s.ts = ts
	s.mu.Unlock()
}

// URL returns the base URL s serves on ("" before Start).
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ts == nil {
		return ""
	}
	return s.ts.URL
}

// Restart stops serving, dropping every connection (a hung call's client
// gets no answer), and serves again on the same address, with every message
// and token kept, as a platform's front end restarting.
func (s *Server) Restart() error {
	s.mu.Lock()
	ts := s.ts
	close(s.released)
	s.released = make(chan struct{})
	s.stats.Restarts++
	s.mu.Unlock()
	if ts == nil {
		return errors.New("replytest: restart of a server not started")
	}
	addr := ts.Listener.Addr().String()
	ts.CloseClientConnections()
	ts.Close()
	var ln net.Listener
	var err error
	for range 50 { // the port is ours; a moment may pass before it is free again
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("replytest: restart: %w", err)
	}
	s.serve(ln)
	return nil
}

// Close stops serving; hung calls end.
func (s *Server) Close() {
	s.mu.Lock()
	ts := s.ts
	s.ts = nil
	select {
	case <-s.released:
	default:
		close(s.released)
	}
	s.mu.Unlock()
	if ts != nil {
		ts.CloseClientConnections()
		ts.Close()
	}
}

// Next queues faults for the next calls, one call each, before the odds.
func (s *Server) Next(faults ...Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, faults...)
}

// SetOdds sets the faults' probabilities for the calls that follow.
func (s *Server) SetOdds(o Odds) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.Odds = o
}

// Count returns the number of messages delivered to chat with text.
func (s *Server) Count(chat, text string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.count[[2]string{chat, text}]
}

// Messages returns the messages delivered, in order.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// Duplicates returns the number of messages of each (chat, text) delivered
// more than once, keyed by chat and text joined with a NUL byte.
func (s *Server) Duplicates() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := map[string]int{}
	for k, n := range s.count {
		if n > 1 {
			d[k[0]+"\x00"+k[1]] = n
		}
	}
	return d
}

// Stats returns what s did so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Faults = map[Fault]int{}
	for f, n := range s.stats.Faults {
		st.Faults[f] = n
	}
	return st
}

// String sums up the stats in one line.
func (st Stats) String() string {
	faults := make([]string, 0, len(st.Faults))
	for f, n := range st.Faults {
		faults = append(faults, fmt.Sprintf("%s=%d", f, n))
	}
	sort.Strings(faults)
	return fmt.Sprintf("calls=%d delivered=%d repeats=%d restarts=%d faults=%v",
		st.Calls, st.Delivered, st.Repeats, st.Restarts, faults)
}

// fault draws the fault of a call, and counts the call.
func (s *Server) fault() (Fault, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Calls++
	f := OK
	if len(s.queue) > 0 {
		f, s.queue = s.queue[0], s.queue[1:]
	} else {
		o, x := s.cfg.Odds, s.rng.Float64()
		for _, c := range []struct {
			p float64
			f Fault
		}{{o.Hang, Hang}, {o.FailAfter, FailAfter}, {o.FailBefore, FailBefore}, {o.Reject, Reject},
			{o.Throttle, Throttle}, {o.BadGateway, BadGateway}} {
			if x < c.p {
				f = c.f
				break
			}
			x -= c.p
		}
	}
	if f != OK {
		s.stats.Faults[f]++
	}
	return f, s.released
}

// accept delivers the message of a call with token (scoped by scope) unless
// the token's first message is within window: then it returns that one
// (repeat true). The ids are "{prefix}{n}".
func (s *Server) accept(m Message, scope string, window time.Duration, prefix string) (f first, repeat bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.cfg.Now()
	tk := m.Platform + "\x00" + scope + "\x00" + m.Token
	if m.Token != "" {
		if f, ok := s.tokens[tk]; ok && now.Sub(f.at) < window {
			s.stats.Repeats++
			return f, true
		}
	}
	s.seq++
	f = first{id: fmt.Sprintf("%s%d", prefix, s.seq), request: fmt.Sprintf("req-%d", s.seq), at: now}
	m.ID, m.At = f.id, now
	s.msgs = append(s.msgs, m)
	s.count[[2]string{m.Chat, m.Text}]++
	s.stats.Delivered++
	if m.Token != "" {
		s.tokens[tk] = f
	}
	return f, false
}

// hang waits until the client gives up or the server restarts, and aborts
// the response: the client gets no answer.
func hang(r *http.Request, released <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-released:
	}
	panic(http.ErrAbortHandler)
}
