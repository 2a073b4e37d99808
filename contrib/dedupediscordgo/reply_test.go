package dedupediscordgo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupediscordgo"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeDiscord answers Create Message as Discord documents enforce_nonce: one
// message per nonce, the first message again for a repeat. Its faults, taken
// in order, are "500" (refused, not created), "400", "created+500" (created,
// then answered 500) and "created+hang" (created, no answer until the client
// gives up).
type fakeDiscord struct {
	mu       sync.Mutex
	faults   []string
	messages []string          // ids, in order of creation
	byNonce  map[string]string // nonce → id
	last     map[string]any
}

func (f *fakeDiscord) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var params map[string]any
	_ = json.Unmarshal(body, &params)
	f.mu.Lock()
	f.last = params
	fault := ""
	if len(f.faults) > 0 {
		fault, f.faults = f.faults[0], f.faults[1:]
	}
	if fault == "400" || fault == "500" {
		f.mu.Unlock()
		code := map[string]int{"400": 400, "500": 500}[fault]
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"message":"fault","code":%d}`, code)
		return
	}
	nonce, _ := params["nonce"].(string)
	id, ok := f.byNonce[nonce]
	if !ok || params["enforce_nonce"] != true {
		id = fmt.Sprint(1180000000000000000 + len(f.messages) + 1)
		f.messages = append(f.messages, id)
		f.byNonce[nonce] = id
	}
	f.mu.Unlock()
	switch fault {
	case "created+500":
		w.WriteHeader(http.StatusInternalServerError)
	case "created+hang":
		<-r.Context().Done()
	default:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": id, "channel_id": "C1", "content": params["content"]})
	}
}

func (f *fakeDiscord) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.messages)
}

// toServer sends every request to the test server.
type toServer struct{ u *url.URL }

func (t toServer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host = t.u.Scheme, t.u.Host
	return http.DefaultTransport.RoundTrip(r)
}

// discordSession is a discordgo session whose REST calls go to a fake
// Discord with faults.
func discordSession(t *testing.T, faults ...string) (*discordgo.Session, *fakeDiscord) {
	f := &fakeDiscord{faults: faults, byNonce: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	s, err := discordgo.New("Bot token")
	require.NoError(t, err)
	s.Client = &http.Client{Transport: toServer{u}, Timeout: 2 * time.Second}
	s.MaxRestRetries = 0
	return s, f
}

func composeContent(text string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return json.Marshal(&discordgo.MessageSend{Content: text}) }
}

// TestSendMessage: through a Sender, a send Discord created but whose answer
// was lost (a 5xx, a timeout) is unknown; the next Send sends it again with
// the same nonce and Discord returns the first message: one reply. A 400 is
// NotSent and the next Send sends it.
func TestSendMessage(t *testing.T) {
	key := dedupe.Key{Channel: "discord", MessageID: "1179999999999999999"}
	for _, fault := range []string{"created+500", "created+hang", "400", "500"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			s, f := discordSession(t, fault)
			sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Discord)
			_, err := sender.Send(context.Background(), key, 0, composeContent("pong"), dedupediscordgo.SendMessage(s, "C1"))
			require.Error(t, err)
			assert.Equal(t, fault == "400", reply.IsNotSent(err), "%v", err)
			rc, err := sender.Send(context.Background(), key, 0, nil, dedupediscordgo.SendMessage(s, "C1"))
			require.NoError(t, err)
			assert.True(t, rc.Sent)
			assert.Equal(t, "1180000000000000001", rc.ID)
			assert.Equal(t, 1, f.count(), "duplicate reply")
			assert.Equal(t, reply.Nonce(key, 0), f.last["nonce"])
			assert.Equal(t, true, f.last["enforce_nonce"])
			assert.Equal(t, "pong", f.last["content"])
		})
	}
}

func TestSendMessageBodyNotObject(t *testing.T) {
	s, f := discordSession(t)
	_, err := dedupediscordgo.SendMessage(s, "C1")(context.Background(), reply.Message{Body: []byte(`"hi"`), Attempt: 1})
	assert.True(t, reply.IsNotSent(err))
	assert.Zero(t, f.count())
}
