package dedupegotelegram_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupegotelegram"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/go-telegram/bot"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// replySend is the SendFunc under test, on a bot of api.
func replySend(t *testing.T, api *sendAPI) reply.SendFunc {
	b, err := bot.New("123:token", bot.WithServerURL(api.srv.URL), bot.WithSkipGetMe(),
		bot.WithHTTPClient(time.Minute, &http.Client{Timeout: 2 * time.Second}))
	require.NoError(t, err)
	return dedupegotelegram.SendMessage(b, bot.SendMessageParams{ChatID: 7})
}

// sendAPI is a Bot API that answers getMe and sendMessage as Telegram does:
// no idempotency, each accepted sendMessage posts a message. Its faults,
// taken in order: "sent+500" (posted, then answered 502 with an HTML page),
// "sent+hang" (posted, no answer until the client gives up), "400" (chat not
// found), "429" (retry after 5) and "500" (answered without posting).
type sendAPI struct {
	mu     sync.Mutex
	faults []string
	texts  []string
	srv    *httptest.Server
}

func newSendAPI(t *testing.T, faults ...string) *sendAPI {
	a := &sendAPI{faults: faults}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *sendAPI) serve(w http.ResponseWriter, r *http.Request) {
	text := sentText(r)
	w.Header().Set("Content-Type", "application/json")
	if strings.HasSuffix(r.URL.Path, "/getMe") {
		_, _ = io.WriteString(w, `{"ok":true,"result":{"id":1,"is_bot":true,"first_name":"bot","username":"bot"}}`)
		return
	}
	a.mu.Lock()
	fault := ""
	if len(a.faults) > 0 {
		fault, a.faults = a.faults[0], a.faults[1:]
	}
	switch fault {
	case "400":
		a.mu.Unlock()
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}`)
		return
	case "429":
		a.mu.Unlock()
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 5","parameters":{"retry_after":5}}`)
		return
	case "500":
		a.mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"ok":false,"error_code":500,"description":"Internal Server Error"}`)
		return
	}
	a.texts = append(a.texts, text)
	id := len(a.texts)
	a.mu.Unlock()
	switch fault {
	case "sent+500":
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = io.WriteString(w, "<html>502 Bad Gateway</html>")
	case "sent+hang":
		<-r.Context().Done()
	default:
		_, _ = fmt.Fprintf(w, `{"ok":true,"result":{"message_id":%d,"date":1,"chat":{"id":7,"type":"private"},"text":%q}}`, id, text)
	}
}

// sentText reads the text of a sendMessage, sent as JSON, a form or a
// multipart form.
func sentText(r *http.Request) string {
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		var p struct {
			Text string `json:"text"`
		}
		_ = json.NewDecoder(r.Body).Decode(&p)
		return p.Text
	}
	_ = r.ParseMultipartForm(1 << 20)
	return r.FormValue("text")
}

func (a *sendAPI) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.texts)
}

var replyKey = dedupe.Key{Channel: "telegram", MessageID: "8817"}

func composeText(text string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) { return []byte(text), nil }
}

// TestReplyOutcomes: an answered 4xx is NotSent and the next Send sends the
// reply; a send Telegram posted but whose answer was lost (a 502, a timeout)
// or a 500 is unknown: at most once (the preset) does not send it again and
// reports it possibly lost, at least once sends it again and reports a
// possible duplicate.
func TestReplyOutcomes(t *testing.T) {
	for _, x := range []struct {
		fault   string
		notSent bool
		posted  int // by the first send
	}{{"400", true, 0}, {"429", true, 0}, {"500", false, 0}, {"sent+500", false, 1}, {"sent+hang", false, 1}} {
		for _, policy := range []reply.Policy{reply.AtMostOnce, reply.AtLeastOnce} {
			t.Run(x.fault+"/"+policy.String(), func(t *testing.T) {
				t.Parallel()
				api := newSendAPI(t, x.fault)
				send := replySend(t, api)
				sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram, reply.WithPolicy(policy))
				_, err := sender.Send(context.Background(), replyKey, 0, composeText("pong"), send)
				require.Error(t, err)
				assert.Equal(t, x.notSent, reply.IsNotSent(err), "%v", err)
				assert.Equal(t, x.posted, api.count())

				rc, err := sender.Send(context.Background(), replyKey, 0, nil, send)
				switch {
				case x.notSent:
					require.NoError(t, err)
					assert.False(t, rc.MaybeDuplicate)
					assert.Equal(t, 1, api.count())
				case policy == reply.AtMostOnce:
					assert.True(t, errors.Is(err, reply.ErrMaybeLost), "%v", err)
					assert.Equal(t, x.posted, api.count())
				default:
					require.NoError(t, err)
					assert.True(t, rc.MaybeDuplicate)
					assert.Equal(t, x.posted+1, api.count())
				}
			})
		}
	}
}

func TestReplySent(t *testing.T) {
	api := newSendAPI(t)
	sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Telegram)
	rc, err := sender.Send(context.Background(), replyKey, 0, composeText("pong"), replySend(t, api))
	require.NoError(t, err)
	assert.Equal(t, "1", rc.ID)
	rc, err = sender.Send(context.Background(), replyKey, 0, composeText("pong"), replySend(t, api))
	require.NoError(t, err)
	assert.False(t, rc.Sent)
	assert.Equal(t, []string{"pong"}, api.texts)
}
