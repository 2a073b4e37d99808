package reply_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fault is what the fake platform does with the next send.
type fault int

const (
	ok            fault = iota // accept and answer
	acceptThen500              // accept, then answer 500 (the outcome is unknown to the sender)
	acceptThenCut              // accept, then hold the answer until the client gives up
	reject400                  // refuse without accepting
	fail500                    // answer 500 without accepting
)

// fakePlatform is an httptest server that honours a send token as the
// platform documents: it posts a message once per token and answers a repeat
// of the token the way the platform does (409 for LINE, the first message
// again for Discord and Feishu). With no token (Telegram, Slack) each
// accepted send posts a message. Faults are taken in order, then ok.
type fakePlatform struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	faults []fault
	posted []posted          // the messages the user sees
	byTok  map[string]string // token → message id
	reqs   []*http.Request
	bodies [][]byte
}

// posted is one message the fake platform showed.
type posted struct {
	id, token string
	body      []byte
}

func newFake(t *testing.T, faults ...fault) *fakePlatform {
	f := &fakePlatform{t: t, faults: faults, byTok: map[string]string{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// client gives up on an answer after a bound long enough for a loaded
// machine: acceptThenCut holds its answer until then.
func (f *fakePlatform) client() *http.Client { return &http.Client{Timeout: 2 * time.Second} }

func (f *fakePlatform) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.posted)
}

func (f *fakePlatform) last() (*http.Request, []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reqs[len(f.reqs)-1], f.bodies[len(f.bodies)-1]
}

func (f *fakePlatform) next() fault {
	if len(f.faults) == 0 {
		return ok
	}
	x := f.faults[0]
	f.faults = f.faults[1:]
	return x
}

func (f *fakePlatform) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.bodies = append(f.bodies, body)
	if r.Method == http.MethodGet { // Slack's history
		f.history(w)
		f.mu.Unlock()
		return
	}
	x := f.next()
	switch x {
	case reject400:
		f.mu.Unlock()
		http.Error(w, `{"message":"The request body has 1 error(s)","code":230001,"ok":false,"error_code":400}`, http.StatusBadRequest)
		return
	case fail500:
		f.mu.Unlock()
		http.Error(w, `{"message":"internal"}`, http.StatusInternalServerError)
		return
	}
	tok := f.token(r, body)
	id, repeat := f.byTok[tok]
	if !repeat || tok == "" {
		id = fmt.Sprintf("m%d", len(f.posted)+1)
		f.posted = append(f.posted, posted{id: id, token: tok, body: body})
		if tok != "" {
			f.byTok[tok] = id
		}
	}
	f.mu.Unlock()
	switch x {
	case acceptThen500:
		http.Error(w, "upstream failed", http.StatusBadGateway)
	case acceptThenCut:
		<-r.Context().Done()
	default:
		f.answer(w, r, id, repeat && tok != "")
	}
}

// token finds the send's token where each platform carries it.
func (f *fakePlatform) token(r *http.Request, body []byte) string {
	if k := r.Header.Get("X-Line-Retry-Key"); k != "" {
		return k
	}
	var b struct {
		Nonce    string `json:"nonce"`
		Enforce  bool   `json:"enforce_nonce"`
		UUID     string `json:"uuid"`
		Metadata *struct {
			Payload struct {
				Token string `json:"token"`
			} `json:"event_payload"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(body, &b)
	switch {
	case b.Nonce != "" && b.Enforce:
		return b.Nonce
	case b.UUID != "":
		return b.UUID
	}
	return "" // Slack's metadata deduplicates nothing; Telegram has no token
}

// answer writes each platform's success answer.
func (f *fakePlatform) answer(w http.ResponseWriter, r *http.Request, id string, repeat bool) {
	w.Header().Set("Content-Type", "application/json")
	p := r.URL.Path
	switch {
	case strings.HasPrefix(p, "/v2/bot/message/"):
		if repeat {
			w.Header().Set("X-Line-Accepted-Request-Id", "req-"+id)
			w.WriteHeader(http.StatusConflict)
			fmt.Fprintf(w, `{"message":"The retry key is already accepted","sentMessages":[{"id":%q,"quoteToken":"q"}]}`, id)
			return
		}
		fmt.Fprintf(w, `{"sentMessages":[{"id":%q,"quoteToken":"q"}]}`, id)
	case strings.HasPrefix(p, "/api/v10/channels/"):
		fmt.Fprintf(w, `{"id":%q,"type":0,"content":"…"}`, id)
	case strings.HasPrefix(p, "/open-apis/"):
		fmt.Fprintf(w, `{"code":0,"msg":"success","data":{"message_id":%q}}`, id)
	case strings.HasPrefix(p, "/bot"):
		fmt.Fprintf(w, `{"ok":true,"result":{"message_id":%s,"chat":{"id":1}}}`, strings.TrimPrefix(id, "m"))
	case p == "/api/chat.postMessage":
		fmt.Fprintf(w, `{"ok":true,"channel":"C1","ts":%q}`, id)
	default:
		http.NotFound(w, r)
	}
}

// history answers conversations.history with every posted message, newest
// first, with its metadata.
func (f *fakePlatform) history(w http.ResponseWriter) {
	type msg struct {
		TS       string          `json:"ts"`
		Metadata json.RawMessage `json:"metadata,omitempty"`
	}
	out := struct {
		OK       bool  `json:"ok"`
		Messages []msg `json:"messages"`
	}{OK: true, Messages: []msg{}}
	for i := len(f.posted) - 1; i >= 0; i-- {
		var b struct {
			Metadata json.RawMessage `json:"metadata"`
		}
		_ = json.Unmarshal(f.posted[i].body, &b)
		out.Messages = append(out.Messages, msg{TS: f.posted[i].id, Metadata: b.Metadata})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
