package dedupeslack_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupeslack"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/slack-go/slack"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeWebAPI answers chat.postMessage as Slack does (no idempotency: each
// accepted call posts a message) and conversations.history with the posted
// messages and their metadata, newest first. Its faults, taken in order:
// "posted+500" (posted, answered 500), "posted+hang" (posted, no answer until
// the client gives up), "channel_not_found" and "internal_error" (ok false,
// nothing posted), "429".
type fakeWebAPI struct {
	mu     sync.Mutex
	faults []string
	posted []map[string]any // ts, text, metadata
}

func (f *fakeWebAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	w.Header().Set("Content-Type", "application/json")
	f.mu.Lock()
	if strings.HasSuffix(r.URL.Path, "/conversations.history") {
		msgs := []map[string]any{}
		for i := len(f.posted) - 1; i >= 0; i-- {
			msgs = append(msgs, f.posted[i])
		}
		f.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"ok": true, "messages": msgs})
		return
	}
	fault := ""
	if len(f.faults) > 0 {
		fault, f.faults = f.faults[0], f.faults[1:]
	}
	switch fault {
	case "channel_not_found", "internal_error":
		f.mu.Unlock()
		fmt.Fprintf(w, `{"ok":false,"error":%q}`, fault)
		return
	case "429":
		f.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	var meta map[string]any
	_ = json.Unmarshal([]byte(r.Form.Get("metadata")), &meta)
	ts := fmt.Sprintf("1700000000.%06d", len(f.posted)+1)
	f.posted = append(f.posted, map[string]any{"type": "message", "ts": ts, "text": r.Form.Get("text"), "metadata": meta})
	f.mu.Unlock()
	switch fault {
	case "posted+500":
		w.WriteHeader(http.StatusInternalServerError)
	case "posted+hang":
		<-r.Context().Done()
	default:
		fmt.Fprintf(w, `{"ok":true,"channel":%q,"ts":%q}`, r.Form.Get("channel"), ts)
	}
}

func (f *fakeWebAPI) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.posted)
}

func slackAPI(t *testing.T, faults ...string) (*slack.Client, *fakeWebAPI) {
	f := &fakeWebAPI{faults: faults}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	api := slack.New("xoxb-test", slack.OptionAPIURL(srv.URL+"/"),
		slack.OptionHTTPClient(&http.Client{Timeout: 2 * time.Second}))
	return api, f
}

var slackKey = dedupe.Key{Channel: "slack", MessageID: "Ev08MFMKH6"}

func composeReply(text string) func(context.Context) ([]byte, error) {
	return func(context.Context) ([]byte, error) {
		return json.Marshal(dedupeslack.ReplyBody{Channel: "C1", Text: text})
	}
}

// TestPostMessageCheck: a message Slack posted but whose answer was lost is
// found by Check in the channel's history: the next Send records it sent and
// posts nothing. Without Check, at most once reports it possibly lost, at
// least once posts it again.
func TestPostMessageCheck(t *testing.T) {
	for _, fault := range []string{"posted+500", "posted+hang"} {
		t.Run(fault, func(t *testing.T) {
			t.Parallel()
			api, f := slackAPI(t, fault)
			sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Slack, reply.WithCheck(dedupeslack.Check(api, 0)))
			_, err := sender.Send(context.Background(), slackKey, 0, composeReply("hi"), dedupeslack.PostMessage(api))
			require.Error(t, err)
			assert.False(t, reply.IsNotSent(err), "%v", err)
			rc, err := sender.Send(context.Background(), slackKey, 0, nil, dedupeslack.PostMessage(api))
			require.NoError(t, err)
			assert.Equal(t, "1700000000.000001", rc.ID)
			assert.Equal(t, 1, f.count(), "duplicate reply")
		})
	}
	t.Run("at most once", func(t *testing.T) {
		api, f := slackAPI(t, "posted+500")
		sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Slack)
		_, err := sender.Send(context.Background(), slackKey, 0, composeReply("hi"), dedupeslack.PostMessage(api))
		require.Error(t, err)
		_, err = sender.Send(context.Background(), slackKey, 0, nil, dedupeslack.PostMessage(api))
		assert.True(t, errors.Is(err, reply.ErrMaybeLost), "%v", err)
		assert.Equal(t, 1, f.count())
	})
	t.Run("at least once", func(t *testing.T) {
		api, f := slackAPI(t, "posted+500")
		sender := reply.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), reply.Slack, reply.WithPolicy(reply.AtLeastOnce))
		_, err := sender.Send(context.Background(), slackKey, 0, composeReply("hi"), dedupeslack.PostMessage(api))
		require.Error(t, err)
		rc, err := sender.Send(context.Background(), slackKey, 0, nil, dedupeslack.PostMessage(api))
		require.NoError(t, err)
		assert.True(t, rc.MaybeDuplicate)
		assert.Equal(t, 2, f.count())
	})
}

func TestPostMessageOutcomes(t *testing.T) {
	for fault, notSent := range map[string]bool{"channel_not_found": true, "429": true, "internal_error": false} {
		t.Run(fault, func(t *testing.T) {
			api, f := slackAPI(t, fault)
			_, err := dedupeslack.PostMessage(api)(context.Background(), reply.Message{Key: slackKey, Body: []byte(`{"channel":"C1","text":"hi"}`), Attempt: 1})
			require.Error(t, err)
			assert.Equal(t, notSent, reply.IsNotSent(err), "%v", err)
			assert.Zero(t, f.count())
		})
	}
	api, f := slackAPI(t)
	ts, err := dedupeslack.PostMessage(api)(context.Background(), reply.Message{Key: slackKey, Body: []byte(`{"channel":"C1","text":"hi"}`), Attempt: 1})
	require.NoError(t, err)
	assert.Equal(t, "1700000000.000001", ts)
	assert.Equal(t, map[string]any{"event_type": reply.SlackEventType, "event_payload": map[string]any{"token": reply.UUID(slackKey, 0)}}, f.posted[0]["metadata"])
	_, err = dedupeslack.PostMessage(api)(context.Background(), reply.Message{Body: []byte(`"hi"`), Attempt: 1})
	assert.True(t, reply.IsNotSent(err))
}
