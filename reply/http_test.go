package reply_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
)

var testKey = dedupe.Key{Channel: "line", MessageID: "evt-1"}

// helper is one plain-HTTP helper under test, with a body its platform takes.
type helper struct {
	name  string
	p     reply.Platform
	send  func(api reply.API) reply.SendFunc
	body  string
	dedup bool // the platform drops a repeat of the token
}

func helpers() []helper {
	return []helper{
		{"line", reply.LINE, reply.LINEPush, `{"to":"U1","messages":[{"type":"text","text":"hi"}]}`, true},
		{"discord", reply.Discord, func(a reply.API) reply.SendFunc { return reply.DiscordCreateMessage(a, "C1") }, `{"content":"hi"}`, true},
		{"feishu", reply.Feishu, func(a reply.API) reply.SendFunc { return reply.FeishuCreateMessage(a, "chat_id") }, `{"receive_id":"oc_1","msg_type":"text","content":"{\"text\":\"hi\"}"}`, true},
		{"telegram", reply.Telegram, func(a reply.API) reply.SendFunc { return reply.TelegramMethod(a, "sendMessage") }, `{"chat_id":1,"text":"hi"}`, false},
		{"slack", reply.Slack, reply.SlackPostMessage, `{"channel":"C1","text":"hi"}`, false},
	}
}

// message is attempt n of slot 0 of testKey, as a Sender of p hands it over.
func message(p reply.Platform, body string, n int) reply.Message {
	m := reply.Message{Key: testKey, Slot: 0, Body: []byte(body), Attempt: n}
	if p.Token != nil {
		m.Token = p.Token(testKey, 0)
	}
	return m
}

func TestHTTPSent(t *testing.T) {
	for _, h := range helpers() {
		t.Run(h.name, func(t *testing.T) {
			f := newFake(t)
			send := h.send(reply.API{Client: f.client(), BaseURL: f.srv.URL, Credential: "secret"})
			id, err := send(context.Background(), message(h.p, h.body, 1))
			require.NoError(t, err)
			assert.NotEmpty(t, id)
			assert.Equal(t, 1, f.count())
		})
	}
}

// TestHTTPUnknownThenResend: the platform accepts a send and its answer is
// lost (a 5xx after accepting, or no answer before the client's timeout);
// the helper leaves the outcome unknown, and the second attempt, with the
// same token, is sent: on LINE, Discord and Feishu the user sees one message,
// on Telegram and Slack two (which is why their policy is AtMostOnce, or a
// read-back check for Slack).
func TestHTTPUnknownThenResend(t *testing.T) {
	for _, x := range []struct {
		name string
		f    fault
	}{{"5xx after accepting", acceptThen500}, {"timeout after accepting", acceptThenCut}} {
		for _, h := range helpers() {
			t.Run(x.name+"/"+h.name, func(t *testing.T) {
				t.Parallel()
				f := newFake(t, x.f)
				send := h.send(reply.API{Client: f.client(), BaseURL: f.srv.URL, Credential: "secret"})
				_, err := send(context.Background(), message(h.p, h.body, 1))
				require.Error(t, err)
				assert.False(t, reply.IsNotSent(err), "an accepted send must not be NotSent: %v", err)
				id, err := send(context.Background(), message(h.p, h.body, 2))
				require.NoError(t, err)
				if h.dedup {
					assert.Equal(t, 1, f.count(), "the repeat of the token posted a second message")
					assert.Equal(t, "m1", id)
				} else {
					assert.Equal(t, 2, f.count())
				}
			})
		}
	}
}

func TestHTTPRejectedIsNotSent(t *testing.T) {
	for _, h := range helpers() {
		t.Run(h.name, func(t *testing.T) {
			f := newFake(t, reject400)
			send := h.send(reply.API{Client: f.client(), BaseURL: f.srv.URL, Credential: "secret"})
			_, err := send(context.Background(), message(h.p, h.body, 1))
			require.Error(t, err)
			assert.True(t, reply.IsNotSent(err), "%v", err)
			var se *reply.StatusError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, http.StatusBadRequest, se.Status)
			assert.Equal(t, h.name, se.Platform)
			assert.Zero(t, f.count())
		})
	}
}

func TestHTTP5xxIsUnknown(t *testing.T) {
	for _, h := range helpers() {
		t.Run(h.name, func(t *testing.T) {
			f := newFake(t, fail500)
			send := h.send(reply.API{Client: f.client(), BaseURL: f.srv.URL, Credential: "secret"})
			_, err := send(context.Background(), message(h.p, h.body, 1))
			require.Error(t, err)
			assert.False(t, reply.IsNotSent(err))
			assert.True(t, strings.HasPrefix(err.Error(), "reply: "), err.Error())
		})
	}
}

// TestHTTPNoConnectionIsNotSent: a platform that cannot be reached did not
// get the request: nothing was sent.
func TestHTTPNoConnectionIsNotSent(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	base := srv.URL
	srv.Close()
	for _, h := range helpers() {
		t.Run(h.name, func(t *testing.T) {
			send := h.send(reply.API{BaseURL: base, Credential: "123:SECRET"})
			_, err := send(context.Background(), message(h.p, h.body, 1))
			require.Error(t, err)
			assert.True(t, reply.IsNotSent(err), "%v", err)
			assert.NotContains(t, err.Error(), "SECRET", "the error shows the credential")
		})
	}
}

func TestHTTPBodyNotAnObject(t *testing.T) {
	for _, h := range helpers() {
		if h.name == "line" || h.name == "telegram" { // sent as is
			continue
		}
		t.Run(h.name, func(t *testing.T) {
			f := newFake(t)
			send := h.send(reply.API{Client: f.client(), BaseURL: f.srv.URL})
			_, err := send(context.Background(), message(h.p, `["hi"]`, 1))
			assert.True(t, reply.IsNotSent(err), "%v", err)
			assert.Zero(t, f.count())
		})
	}
}

// TestHTTPRequests checks what each helper puts on the wire: the address,
// the credential and the token where the platform's doc says.
func TestHTTPRequests(t *testing.T) {
	wantUUID := reply.UUID(testKey, 0)
	for _, h := range helpers() {
		t.Run(h.name, func(t *testing.T) {
			f := newFake(t)
			send := h.send(reply.API{Client: f.client(), BaseURL: f.srv.URL, Credential: "secret"})
			_, err := send(context.Background(), message(h.p, h.body, 1))
			require.NoError(t, err)
			r, body := f.last()
			var got map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(body, &got))
			switch h.name {
			case "line":
				assert.Equal(t, "/v2/bot/message/push", r.URL.Path)
				assert.Equal(t, "Bearer secret", r.Header.Get("Authorization"))
				assert.Equal(t, wantUUID, r.Header.Get("X-Line-Retry-Key"))
			case "discord":
				assert.Equal(t, "/api/v10/channels/C1/messages", r.URL.Path)
				assert.Equal(t, "Bot secret", r.Header.Get("Authorization"))
				assert.JSONEq(t, `"`+reply.Nonce(testKey, 0)+`"`, string(got["nonce"]))
				assert.JSONEq(t, `true`, string(got["enforce_nonce"]))
				assert.JSONEq(t, `"hi"`, string(got["content"]))
			case "feishu":
				assert.Equal(t, "/open-apis/im/v1/messages", r.URL.Path)
				assert.Equal(t, "chat_id", r.URL.Query().Get("receive_id_type"))
				assert.Equal(t, "Bearer secret", r.Header.Get("Authorization"))
				assert.JSONEq(t, `"`+wantUUID+`"`, string(got["uuid"]))
			case "telegram":
				assert.Equal(t, "/botsecret/sendMessage", r.URL.Path)
				assert.JSONEq(t, h.body, string(body))
			case "slack":
				assert.Equal(t, "/api/chat.postMessage", r.URL.Path)
				assert.Equal(t, "Bearer secret", r.Header.Get("Authorization"))
				assert.JSONEq(t, `{"event_type":"dedupe_reply","event_payload":{"token":"`+wantUUID+`"}}`, string(got["metadata"]))
			}
		})
	}
}

// TestLINERetryKeyAccepted: LINE's 409 for a retry key it accepted before is
// a sent reply, with the id of the first send.
func TestLINERetryKeyAccepted(t *testing.T) {
	f := newFake(t)
	send := reply.LINEPush(reply.API{Client: f.client(), BaseURL: f.srv.URL})
	id1, err := send(context.Background(), message(reply.LINE, `{"to":"U1","messages":[]}`, 1))
	require.NoError(t, err)
	id2, err := send(context.Background(), message(reply.LINE, `{"to":"U1","messages":[]}`, 2))
	require.NoError(t, err)
	assert.Equal(t, id1, id2)
	assert.Equal(t, 1, f.count())
}

// TestLINEReplyLaterAttempt: the reply API takes no retry key; its 400 on an
// attempt after the first may mean the reply token was used by the first: the
// outcome is unknown, not NotSent.
func TestLINEReplyLaterAttempt(t *testing.T) {
	for _, n := range []int{1, 2} {
		f := newFake(t, reject400)
		send := reply.LINEReply(reply.API{Client: f.client(), BaseURL: f.srv.URL})
		_, err := send(context.Background(), message(reply.LINE, `{"replyToken":"r","messages":[]}`, n))
		require.Error(t, err)
		assert.Equal(t, n == 1, reply.IsNotSent(err), "attempt %d: %v", n, err)
		r, _ := f.last()
		assert.Empty(t, r.Header.Get("X-Line-Retry-Key"), "LINE answers 400 to a retry key on the reply API")
	}
}

func TestSlackErrors(t *testing.T) {
	for code, notSent := range map[string]bool{"channel_not_found": true, "ratelimited": true, "internal_error": false, "fatal_error": false} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte(`{"ok":false,"error":"` + code + `"}`))
		}))
		_, err := reply.SlackPostMessage(reply.API{BaseURL: srv.URL})(context.Background(), message(reply.Slack, `{"channel":"C1","text":"x"}`, 1))
		srv.Close()
		require.Error(t, err, code)
		assert.Equal(t, notSent, reply.IsNotSent(err), code)
		assert.Contains(t, err.Error(), code)
	}
}

// TestSlackCheck: after an accepted send whose answer was lost, the read-back
// finds the message by its metadata; a reply never sent is not found.
func TestSlackCheck(t *testing.T) {
	f := newFake(t, acceptThen500)
	api := reply.API{Client: f.client(), BaseURL: f.srv.URL, Credential: "secret"}
	body := `{"channel":"C1","text":"hi"}`
	_, err := reply.SlackPostMessage(api)(context.Background(), message(reply.Slack, body, 1))
	require.Error(t, err)
	check := reply.SlackCheck(api, 0)
	id, found, err := check(context.Background(), message(reply.Slack, body, 2))
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "m1", id)
	r, _ := f.last()
	assert.Equal(t, "/api/conversations.history", r.URL.Path)
	assert.Equal(t, "C1", r.URL.Query().Get("channel"))
	assert.Equal(t, "true", r.URL.Query().Get("include_all_metadata"))
	assert.Equal(t, "100", r.URL.Query().Get("limit"))

	other := message(reply.Slack, body, 2)
	other.Slot = 1
	_, found, err = check(context.Background(), other)
	require.NoError(t, err)
	assert.False(t, found)

	_, _, err = reply.SlackCheck(api, 15)(context.Background(), message(reply.Slack, `{"channel":"C1","thread_ts":"1.2"}`, 2))
	require.NoError(t, err)
	r, _ = f.last()
	assert.Equal(t, "/api/conversations.replies", r.URL.Path)
	assert.Equal(t, "1.2", r.URL.Query().Get("ts"))
	assert.Equal(t, "15", r.URL.Query().Get("limit"))

	_, _, err = check(context.Background(), message(reply.Slack, `{"text":"no channel"}`, 2))
	assert.Error(t, err)
}

func TestSlackCheckErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok":false,"error":"missing_scope"}`))
	}))
	defer srv.Close()
	_, found, err := reply.SlackCheck(reply.API{BaseURL: srv.URL}, 0)(context.Background(), message(reply.Slack, `{"channel":"C1"}`, 2))
	require.Error(t, err)
	assert.False(t, found)
	assert.Contains(t, err.Error(), "missing_scope")
	assert.False(t, errors.Is(err, context.Canceled))
}
