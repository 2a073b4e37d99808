package dedupeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupeline"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeLINE answers push messages as LINE documents the retry key: a request
// is executed once per key; a retry of an accepted key gets 409 (with the
// first request's sentMessages and its request id in
// X-Line-Accepted-Request-Id). Its faults, taken in order: "sent+500"
// (delivered, then answered 500), "sent+hang" (delivered, no answer until
// the client gives up), "400" and "500" (not delivered).
type fakeLINE struct {
	mu        sync.Mutex
	faults    []string
	delivered []string          // texts
	byKey     map[string]string // retry key → message id
	keys      []string
}

func (f *fakeLINE) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("X-Line-Retry-Key")
	w.Header().Set("Content-Type", "application/json")
	f.mu.Lock()
	f.keys = append(f.keys, key)
	fault := ""
	if len(f.faults) > 0 {
		fault, f.faults = f.faults[0], f.faults[1:]
	}
	if fault == "400" || fault == "500" {
		f.mu.Unlock()
		code := map[string]int{"400": 400, "500": 500}[fault]
		w.WriteHeader(code)
		_, _ = fmt.Fprintf(w, `{"message":"fault %d"}`, code)
		return
	}
	if id, ok := f.byKey[key]; ok && key != "" {
		f.mu.Unlock()
		w.Header().Set("X-Line-Accepted-Request-Id", "req-"+id)
		w.WriteHeader(http.StatusConflict)
		_, _ = fmt.Fprintf(w, `{"message":"The retry key is already accepted","sentMessages":[{"id":%q}]}`, id)
		return
	}
	var req struct {
		Messages []struct {
			Text string `json:"text"`
		} `json:"messages"`
	}
	_ = json.Unmarshal(body, &req)
	id := fmt.Sprint(461230966842064896 + len(f.delivered) + 1)
	f.delivered = append(f.delivered, req.Messages[0].Text)
	f.byKey[key] = id
	f.mu.Unlock()
	switch fault {
	case "sent+500":
		w.WriteHeader(http.StatusInternalServerError)
	case "sent+hang":
		<-r.Context().Done()
	default:
		_, _ = fmt.Fprintf(w, `{"sentMessages":[{"id":%q,"quoteToken":"q"}]}`, id)
	}
}

func (f *fakeLINE) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.delivered)
}

func lineAPI(t *testing.T, faults ...string) (*messaging_api.MessagingApiAPI, *fakeLINE) {
	f := &fakeLINE{faults: faults, byKey: map[string]string{}}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	api, err := messaging_api.NewMessagingApiAPI("token",
		messaging_api.WithEndpoint(srv.URL), messaging_api.WithHTTPClient(&http.Client{Timeout: 2 * time.Second}))
	require.NoError(t, err)
	return api, f
}

var lineKey = dedupe.Key{Channel: "line", MessageID: "01H8Z3Q4"}

func composePush(text string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		return json.Marshal(&messaging_api.PushMessageRequest{
			To:       "U4af4980629",
			Messages: []messaging_api.MessageInterface{messaging_api.TextMessage{Text: text}},
		})
	}
}

// TestPushMessage: through a Sender of reply.LINE, a push LINE delivered but
// whose answer was lost (a 500, a timeout) is unknown; the next Send pushes
// it again with the same retry key, LINE answers 409, and the reply is
// recorded sent with the first message's id: one message. A 400 or a 500
// without delivery is sent by the next Send.
func TestPushMessage(t *testing.T) {
	for _, x := range []struct {
		fault   string
		notSent bool
	}{{"sent+500", false}, {"sent+hang", false}, {"400", true}, {"500", false}} {
		t.Run(x.fault, func(t *testing.T) {
			t.Parallel()
			api, f := lineAPI(t, x.fault)
			sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.LINE)
			_, err := sender.Send(context.Background(), lineKey, 0, composePush("pong"), dedupeline.PushMessage(api))
			require.Error(t, err)
			assert.Equal(t, x.notSent, reply.IsNotSent(err), "%v", err)

			rc, err := sender.Send(context.Background(), lineKey, 0, nil, dedupeline.PushMessage(api))
			require.NoError(t, err)
			assert.True(t, rc.Sent)
			assert.Equal(t, "461230966842064897", rc.ID)
			assert.Equal(t, 1, f.count(), "duplicate reply")
			assert.Equal(t, []string{reply.UUID(lineKey, 0), reply.UUID(lineKey, 0)}, f.keys)

			rc, err = sender.Send(context.Background(), lineKey, 0, nil, dedupeline.PushMessage(api))
			require.NoError(t, err)
			assert.False(t, rc.Sent)
			assert.Len(t, f.keys, 2)
		})
	}
}

// TestPushMessage409: a 409 is a sent reply; without sentMessages in its
// body the id is the accepted request's.
func TestPushMessage409(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-Line-Accepted-Request-Id", "req-1")
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"message":"The retry key is already accepted"}`)
	}))
	defer srv.Close()
	api, err := messaging_api.NewMessagingApiAPI("token", messaging_api.WithEndpoint(srv.URL))
	require.NoError(t, err)
	body, _ := composePush("pong")(context.Background())
	id, err := dedupeline.PushMessage(api)(context.Background(), reply.Message{Key: lineKey, Body: body, Attempt: 2})
	require.NoError(t, err)
	assert.Equal(t, "req-1", id)

	_, err = dedupeline.PushMessage(api)(context.Background(), reply.Message{Key: lineKey, Body: []byte(`[]`), Attempt: 1})
	assert.True(t, reply.IsNotSent(err))
}
