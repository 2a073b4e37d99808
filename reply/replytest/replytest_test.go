package replytest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply"
	"github.com/gatewaykit/dedupe/reply/replytest"
)

// tokens are a valid token per platform: a UUID for LINE and Feishu, a
// nonce for Discord, none for Telegram.
var tokens = map[string]string{
	replytest.LINE:     "0b9c2f4e-8a7d-8e1f-9a2b-3c4d5e6f7a8b",
	replytest.Discord:  "n0123456789abcdefghijklmn",
	replytest.Feishu:   "0b9c2f4e-8a7d-8e1f-9a2b-3c4d5e6f7a8b",
	replytest.Telegram: "",
}

var platforms = []string{replytest.LINE, replytest.Discord, replytest.Feishu, replytest.Telegram}

// clock is a settable clock for the tokens' windows.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// start serves a fake platform for t.
func start(t *testing.T, cfg replytest.Config) *replytest.Server {
	t.Helper()
	s := replytest.New(cfg)
	_, err := s.Start()
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

// sender returns the SendFunc of platform to chat "c1" on s, whose calls time
// out after timeout.
func sender(t *testing.T, s *replytest.Server, platform string, timeout time.Duration) reply.SendFunc {
	t.Helper()
	send, err := replytest.Client{HTTP: &http.Client{Timeout: timeout}, BaseURL: s.URL(), Auth: "bot-1"}.Send(platform, "c1")
	require.NoError(t, err)
	return send
}

func msg(platform string, attempt int) reply.Message {
	return reply.Message{Key: dedupe.Key{Channel: platform, MessageID: "m1"}, Token: tokens[platform], Body: []byte("hello"), Attempt: attempt}
}

// TestTokens: a send and its repeat with the same token make one message on
// the platforms with a token (LINE answers the repeat 409, which is sent),
// two on Telegram.
func TestTokens(t *testing.T) {
	for _, p := range platforms {
		t.Run(p, func(t *testing.T) {
			s := start(t, replytest.Config{})
			send := sender(t, s, p, 10*time.Second)
			id1, err := send(t.Context(), msg(p, 1))
			require.NoError(t, err)
			id2, err := send(t.Context(), msg(p, 2))
			require.NoError(t, err)
			require.NotEmpty(t, id1)
			if p == replytest.Telegram {
				assert.Equal(t, 2, s.Count("c1", "hello"))
				assert.NotEqual(t, id1, id2)
				assert.Equal(t, map[string]int{"c1\x00hello": 2}, s.Duplicates())
				return
			}
			assert.Equal(t, 1, s.Count("c1", "hello"))
			assert.Empty(t, s.Duplicates())
			assert.Len(t, s.Messages(), 1)
			assert.Equal(t, 1, s.Stats().Repeats)
			if p != replytest.LINE { // LINE's 409 gives the accepted request's id, not the message's
				assert.Equal(t, id1, id2)
			}
		})
	}
}

// TestFaults: each fault's outcome as the client sees it, and what the
// platform delivered; a retry with the token after it makes no second message.
func TestFaults(t *testing.T) {
	cases := []struct {
		fault     replytest.Fault
		notSent   bool // the client's error is reply.NotSent
		delivered int  // messages after the faulty call
	}{
		{replytest.Hang, false, 1},
		{replytest.FailAfter, false, 1},
		{replytest.FailBefore, false, 0},
		{replytest.Reject, true, 0},
		{replytest.Throttle, true, 0},
		{replytest.BadGateway, false, 1},
	}
	for _, p := range platforms {
		for _, c := range cases {
			t.Run(p+"/"+c.fault.String(), func(t *testing.T) {
				s := start(t, replytest.Config{})
				send := sender(t, s, p, 300*time.Millisecond)
				s.Next(c.fault)
				_, err := send(t.Context(), msg(p, 1))
				require.Error(t, err)
				assert.Equal(t, c.notSent, reply.IsNotSent(err), "NotSent: %v", err)
				assert.Equal(t, c.delivered, s.Count("c1", "hello"))
				_, err = send(t.Context(), msg(p, 2))
				require.NoError(t, err)
				want := 1
				if p == replytest.Telegram {
					want = c.delivered + 1
				}
				assert.Equal(t, want, s.Count("c1", "hello"), "after the retry")
				assert.Equal(t, 1, s.Stats().Faults[c.fault])
			})
		}
	}
}

// TestWindow: past its window a token is forgotten, and a repeat is a new
// message.
func TestWindow(t *testing.T) {
	windows := map[string]time.Duration{replytest.LINE: 24 * time.Hour, replytest.Discord: 3 * time.Minute, replytest.Feishu: time.Hour}
	for p, w := range windows {
		t.Run(p, func(t *testing.T) {
			c := &clock{now: time.Unix(1e9, 0)}
			s := start(t, replytest.Config{Now: c.Now})
			send := sender(t, s, p, 10*time.Second)
			_, err := send(t.Context(), msg(p, 1))
			require.NoError(t, err)
			c.Add(w - time.Second)
			_, err = send(t.Context(), msg(p, 2))
			require.NoError(t, err)
			assert.Equal(t, 1, s.Count("c1", "hello"), "within the window")
			c.Add(2 * time.Second)
			_, err = send(t.Context(), msg(p, 3))
			require.NoError(t, err)
			assert.Equal(t, 2, s.Count("c1", "hello"), "past the window")
		})
	}
}

// TestRestart: a restart drops a hung call (the client gets an error before
// its timeout) and keeps the messages and tokens; the server answers at the
// same URL.
func TestRestart(t *testing.T) {
	hung := make(chan replytest.Fault, 2)
	s := start(t, replytest.Config{Notify: func(f replytest.Fault) { hung <- f }})
	url := s.URL()
	send := sender(t, s, replytest.LINE, time.Minute)
	s.Next(replytest.Hang)
	done := make(chan error, 1)
	go func() { _, err := send(context.Background(), msg(replytest.LINE, 1)); done <- err }()
	require.Equal(t, replytest.Hang, <-hung) // the call hangs now
	require.NoError(t, s.Restart())
	select {
	case err := <-done:
		require.Error(t, err)
		assert.False(t, reply.IsNotSent(err))
	case <-time.After(30 * time.Second):
		t.Fatal("the hung call did not end with the restart")
	}
	assert.Equal(t, url, s.URL())
	_, err := send(t.Context(), msg(replytest.LINE, 2))
	require.NoError(t, err, "after the restart")
	assert.Equal(t, 1, s.Count("c1", "hello"), "the token was kept")
	assert.Equal(t, 1, s.Stats().Restarts)
}

// TestOdds: faults drawn by probability, reproducibly from the seed.
func TestOdds(t *testing.T) {
	run := func() replytest.Stats {
		s := start(t, replytest.Config{Seed: 7, Odds: replytest.Odds{FailAfter: 0.2, FailBefore: 0.2, Reject: 0.2}})
		send := sender(t, s, replytest.Telegram, 10*time.Second)
		for range 100 {
			_, _ = send(t.Context(), msg(replytest.Telegram, 1))
		}
		return s.Stats()
	}
	a, b := run(), run()
	assert.Equal(t, a.Faults, b.Faults)
	for _, f := range []replytest.Fault{replytest.FailAfter, replytest.FailBefore, replytest.Reject} {
		assert.Positive(t, a.Faults[f], "%s drawn", f)
	}
	assert.Equal(t, 100-a.Faults[replytest.FailBefore]-a.Faults[replytest.Reject], a.Delivered)
}

// TestInvalid: a token in the wrong format is refused with 400, nothing sent.
func TestInvalid(t *testing.T) {
	for p, bad := range map[string]string{replytest.LINE: "not-a-uuid", replytest.Discord: "12345678901234567890123456",
		replytest.Feishu: "123456789012345678901234567890123456789012345678901"} {
		t.Run(p, func(t *testing.T) {
			s := start(t, replytest.Config{})
			m := msg(p, 1)
			m.Token = bad
			_, err := sender(t, s, p, 10*time.Second)(t.Context(), m)
			require.Error(t, err)
			assert.True(t, reply.IsNotSent(err), "%v", err)
			assert.Equal(t, 0, s.Count("c1", "hello"))
		})
	}
}

// TestTelegramBodies: sendMessage takes its text from a JSON, form-encoded or
// multipart body and answers the message with a numeric chat id; getMe
// answers the bot and is not a send call; a throttled call says when to retry.
func TestTelegramBodies(t *testing.T) {
	s := start(t, replytest.Config{})
	post := func(method, contentType string, body io.Reader) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(s.URL()+"/bot1:x/"+method, contentType, body)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	require.NoError(t, mw.WriteField("chat_id", "7"))
	require.NoError(t, mw.WriteField("text", "multipart"))
	require.NoError(t, mw.Close())
	for _, c := range []struct{ contentType, body, text string }{
		{"application/json", `{"chat_id":7,"text":"json"}`, "json"},
		{"application/x-www-form-urlencoded", url.Values{"chat_id": {"7"}, "text": {"form"}}.Encode(), "form"},
		{mw.FormDataContentType(), mp.String(), "multipart"},
	} {
		status, out := post("sendMessage", c.contentType, strings.NewReader(c.body))
		require.Equal(t, http.StatusOK, status, "%s: %v", c.contentType, out)
		assert.Equal(t, map[string]any{"id": 7.0, "type": "private"}, out["result"].(map[string]any)["chat"])
		assert.Equal(t, 1, s.Count("7", c.text), c.contentType)
	}
	status, out := post("getMe", "application/json", strings.NewReader("{}"))
	require.Equal(t, http.StatusOK, status)
	assert.Equal(t, true, out["result"].(map[string]any)["is_bot"])
	s.Next(replytest.Throttle)
	status, out = post("sendMessage", "application/json", strings.NewReader(`{"chat_id":7,"text":"json"}`))
	assert.Equal(t, http.StatusTooManyRequests, status)
	assert.Equal(t, map[string]any{"retry_after": 5.0}, out["parameters"])
	assert.Equal(t, 4, s.Stats().Calls, "getMe is not a send call")
	assert.Equal(t, 1, s.Count("7", "json"))
}

// TestRunTelegram: the Client's Telegram send (4xx NotSent, the rest unknown)
// passes RunTelegram.
func TestRunTelegram(t *testing.T) {
	replytest.RunTelegram(t, func(t *testing.T, baseURL string, chat int64) reply.SendFunc {
		send, err := replytest.Client{HTTP: &http.Client{Timeout: 2 * time.Second}, BaseURL: baseURL, Auth: "1:x"}.
			Send(replytest.Telegram, strconv.FormatInt(chat, 10))
		require.NoError(t, err)
		return send
	})
}
