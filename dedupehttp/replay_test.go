package dedupehttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/internal/httpreplay"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// shownAnswer is a delivery whose platform shows the handler's answer to the
// user, signed as the platform signs it, and the answer the handler gives.
type shownAnswer struct {
	name   string
	preset platform.Preset // with its secret
	body   []byte
	header http.Header
	ctype  string // the answer's Content-Type
	answer string
}

// shownAnswers returns a Slack block_actions interaction, a Slack slash
// command, a Discord application command (type 2) and a Feishu
// card.action.trigger callback (encrypted and signed), with the answers the
// platforms document for them.
func shownAnswers(t *testing.T) []shownAnswer {
	slack := platformtest.NewSigner("slack", "slack-signing-secret")
	discord := platformtest.NewSigner("discord", "discord-application")
	feishu := platformtest.NewSigner("feishu", "feishu-encrypt-key")
	form := func(body []byte) http.Header {
		h := slack.Sign(body, clock)
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		return h
	}
	action := platformFixture(t, "slack_block_actions.form")
	command := platformFixture(t, "slack_slash_command.form")
	interaction := platformFixture(t, "discord_application_command.json")
	card := feishu.Encrypt(platformFixture(t, "feishu_card_action.json"))
	return []shownAnswer{
		{"slack block_actions", slack.Preset(platform.Slack), action, form(action),
			"application/json", `{"replace_original":true,"text":"Lease lease_1 approved by <@U061F7AUR>"}`},
		{"slack slash command", slack.Preset(platform.Slack), command, form(command),
			"text/plain; charset=utf-8", "It is 18°C in 94070, with a light breeze."},
		{"discord application command", discord.Preset(platform.Discord), interaction, discord.Sign(interaction, clock),
			"application/json", `{"type":4,"data":{"content":"A lease is a claim that runs out.","flags":64}}`},
		{"feishu card.action.trigger", feishu.Preset(platform.Feishu), card, feishu.Sign(card, clock),
			"application/json; charset=utf-8", `{"toast":{"type":"success","content":"Approved"},"card":{"type":"raw","data":{"schema":"2.0","body":{"elements":[{"tag":"markdown","content":"**Approved** by Ada"}]}}}}`},
	}
}

// answering is a handler that counts its calls and answers c's answer, or
// with the status fail returns for the call numbered n (from 1), if not 0.
type answering struct {
	c     shownAnswer
	calls atomic.Int32
	fail  func(n int32) int
	block chan struct{} // if not nil, the first call waits for it to close
	in    chan struct{} // closed when the first call started
}

func (a *answering) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := a.calls.Add(1)
	if n == 1 && a.block != nil {
		close(a.in)
		<-a.block
	}
	if a.fail != nil {
		if code := a.fail(n); code != 0 {
			http.Error(w, "try again", code)
			return
		}
	}
	w.Header().Set("Content-Type", a.c.ctype)
	w.Header().Set("X-Handler-Call", "only the named headers are kept")
	_, _ = io.WriteString(w, a.c.answer)
}

// postSigned posts body with header to srv.
func postSigned(t *testing.T, srv *httptest.Server, body []byte, header http.Header) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return reply{status: resp.StatusCode, verdict: resp.Header.Get(dedupehttp.HeaderVerdict), header: resp.Header, body: string(b)}
}

// replayStores returns the stores the replay tests run on: memory, and a
// SQLite file.
func replayStores(t *testing.T) map[string]func(t *testing.T) dedupe.Store {
	return map[string]func(t *testing.T) dedupe.Store{
		"memory": func(*testing.T) dedupe.Store { return dedupe.NewMemoryStore(dedupe.MemoryConfig{}) },
		"sqlite": func(t *testing.T) dedupe.Store {
			st, err := dedupe.OpenSQLite(filepath.Join(t.TempDir(), "dedupe.db"), dedupe.SQLiteConfig{})
			require.NoError(t, err)
			t.Cleanup(func() { st.Close() })
			return st
		},
	}
}

// TestReplayRedelivery checks, for each platform that shows the answer and
// each store, over a real server, that a redelivery gets the first answer
// byte for byte (status, Content-Type, Content-Length, body) with the
// verdict "replayed", and that the handler ran once.
func TestReplayRedelivery(t *testing.T) {
	for storeName, open := range replayStores(t) {
		for _, c := range shownAnswers(t) {
			t.Run(storeName+"/"+c.name, func(t *testing.T) {
				h := &answering{c: c}
				srv := serve(t, dedupehttp.New(dedupe.New(open(t)), c.preset, h, dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet)))
				first := postSigned(t, srv, c.body, c.header)
				require.Equal(t, http.StatusOK, first.status)
				require.Equal(t, c.answer, first.body)
				for range 3 {
					again := postSigned(t, srv, c.body, c.header)
					assert.Equal(t, first.status, again.status)
					assert.Equal(t, c.ctype, again.header.Get("Content-Type"))
					assert.Equal(t, first.header.Get("Content-Length"), again.header.Get("Content-Length"))
					assert.Equal(t, first.body, again.body, "the body byte for byte")
					assert.Equal(t, "replayed", again.verdict)
					assert.Empty(t, again.header.Get("X-Handler-Call"), "a header not named is not kept")
				}
				assert.EqualValues(t, 1, h.calls.Load(), "the handler ran once")
			})
		}
	}
}

// TestReplayToWaitingCopy checks that a copy arriving while the first is
// processed waits for it and gets its answer, for each platform and store.
func TestReplayToWaitingCopy(t *testing.T) {
	for storeName, open := range replayStores(t) {
		for _, c := range shownAnswers(t) {
			t.Run(storeName+"/"+c.name, func(t *testing.T) { waitingCopy(t, open(t), c) })
		}
	}
}

func waitingCopy(t *testing.T, st dedupe.Store, c shownAnswer) {
	c.preset.AckBudget = time.Minute // the copy waits for the release, however slow the machine
	h := &answering{c: c, block: make(chan struct{}), in: make(chan struct{})}
	d := dedupe.New(st)
	ep := dedupehttp.New(d, c.preset, h, dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
	firstDone := make(chan *httptest.ResponseRecorder)
	go func() { firstDone <- deliver(ep, c.body, c.header) }()
	<-h.in
	copyDone := make(chan *httptest.ResponseRecorder)
	go func() { copyDone <- deliver(ep, c.body, c.header) }()
	require.Eventually(t, func() bool { return d.Stats().Waits == 1 }, time.Minute, time.Millisecond,
		"the copy waits for the first")
	close(h.block)
	first, cp := <-firstDone, <-copyDone
	assert.Equal(t, http.StatusOK, first.Code)
	assert.Equal(t, c.answer, first.Body.String())
	assert.Equal(t, first.Code, cp.Code)
	assert.Equal(t, c.ctype, cp.Header().Get("Content-Type"))
	assert.Equal(t, first.Body.Bytes(), cp.Body.Bytes(), "the body byte for byte")
	assert.Equal(t, "replayed", cp.Header().Get(dedupehttp.HeaderVerdict))
	assert.EqualValues(t, 1, h.calls.Load(), "the handler ran once")
	assert.EqualValues(t, 1, d.Stats().WaitsDuplicate)
}

// TestReplayNotAfterFailure checks that a failed first run is not replayed:
// the retry runs the handler, and its answer is the one replayed next.
func TestReplayNotAfterFailure(t *testing.T) {
	for storeName, open := range replayStores(t) {
		for _, c := range shownAnswers(t) {
			t.Run(storeName+"/"+c.name, func(t *testing.T) { notAfterFailure(t, open(t), c) })
		}
	}
}

func notAfterFailure(t *testing.T, st dedupe.Store, c shownAnswer) {
	h := &answering{c: c, fail: func(n int32) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return 0
	}}
	ep := dedupehttp.New(dedupe.New(st), c.preset, h, dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
	w := deliver(ep, c.body, c.header)
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	w = deliver(ep, c.body, c.header)
	assert.Equal(t, http.StatusOK, w.Code, "the retry is processed")
	assert.Equal(t, c.answer, w.Body.String())
	assert.Empty(t, w.Header().Get(dedupehttp.HeaderVerdict))
	w = deliver(ep, c.body, c.header)
	assert.Equal(t, "replayed", w.Header().Get(dedupehttp.HeaderVerdict))
	assert.Equal(t, c.answer, w.Body.String(), "the retry's answer is replayed")
	assert.EqualValues(t, 2, h.calls.Load())
}

// TestReplayAfterRestart checks that the answer is kept in the SQLite file:
// a redelivery served by a new process (a new store, Deduper and endpoint on
// the same file) gets the first answer, without running the handler.
func TestReplayAfterRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dedupe.db")
	for _, c := range shownAnswers(t) {
		t.Run(c.name, func(t *testing.T) {
			h := &answering{c: c}
			var answers []*httptest.ResponseRecorder
			for range 2 { // two processes, one after the other
				st, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
				require.NoError(t, err)
				ep := dedupehttp.New(dedupe.New(st), c.preset, h, dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
				answers = append(answers, deliver(ep, c.body, c.header))
				require.NoError(t, st.Close())
			}
			assert.Equal(t, c.answer, answers[0].Body.String())
			assert.Equal(t, answers[0].Code, answers[1].Code)
			assert.Equal(t, c.ctype, answers[1].Header().Get("Content-Type"))
			assert.Equal(t, answers[0].Body.Bytes(), answers[1].Body.Bytes())
			assert.Equal(t, "replayed", answers[1].Header().Get(dedupehttp.HeaderVerdict))
			assert.EqualValues(t, 1, h.calls.Load())
		})
	}
}

// forgetfulStore keeps no results: it marks without them, as a store may
// once it has dropped a result before its mark.
type forgetfulStore struct{ dedupe.Store }

func (s forgetfulStore) MarkResult(ctx context.Context, k dedupe.Key, _ []byte, ttl time.Duration) error {
	return s.Mark(ctx, k, ttl)
}

// unreadableStore keeps results, but reads back bytes no answer encodes to.
type unreadableStore struct{ *dedupe.MemoryStore }

func (s unreadableStore) Result(ctx context.Context, k dedupe.Key) ([]byte, bool, error) {
	_, marked, err := s.MemoryStore.Result(ctx, k)
	return []byte("\x00not an answer"), marked, err
}

// TestReplayFallsBack checks the copies answered as plain duplicates (200,
// empty, verdict "duplicate") although the endpoint replays: an empty 200
// (not kept), an answer over dedupe.MaxResultSize (counted, logged), a store
// that keeps no results, a kept answer that cannot be read, and a preset
// whose Replay was turned off.
func TestReplayFallsBack(t *testing.T) {
	c := shownAnswers(t)[2] // Discord
	big := shownAnswer{c.name, c.preset, c.body, c.header, "application/json",
		`{"type":4,"data":{"content":"` + strings.Repeat("a", dedupe.MaxResultSize) + `"}}`}
	empty := shownAnswer{c.name, c.preset, c.body, c.header, "", ""}
	off := c
	off.preset.Replay = false
	for _, tc := range []struct {
		name     string
		c        shownAnswer
		store    dedupe.Store
		tooLarge uint64
	}{
		{"empty answer", empty, nil, 0},
		{"too large", big, nil, 1},
		{"store without results", c, forgetfulStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}, 0},
		{"unreadable", c, unreadableStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}, 0},
		{"replay off", off, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &answering{c: tc.c}
			var logs logBuffer
			ep := dedupehttp.New(dedupe.New(tc.store), tc.c.preset, h, dedupehttp.WithClock(at), dedupehttp.WithLogger(logs.logger()))
			first := deliver(ep, tc.c.body, tc.c.header)
			require.Equal(t, http.StatusOK, first.Code)
			assert.Equal(t, tc.c.answer, first.Body.String(), "the first answer reaches the platform whole")
			w := deliver(ep, tc.c.body, tc.c.header)
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
			assert.Empty(t, w.Body.String())
			assert.EqualValues(t, 1, h.calls.Load())
			assert.Equal(t, tc.tooLarge, ep.Stats().ReplayTooLarge)
			if tc.tooLarge > 0 {
				assert.Contains(t, logs.String(), "answer too large to replay")
			}
		})
	}
}

// TestReplayMiddlewareHeaders checks WithReplay on a custom extractor: the
// status, Content-Type and the headers named are replayed, others are not.
// The extractor authenticates nothing, hence WithReplayUnauthenticated.
func TestReplayMiddlewareHeaders(t *testing.T) {
	var calls atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("X-Reply-Id", "r-1")
		w.Header().Add("X-Reply-Id", "r-2")
		w.Header().Set("X-Other", "not kept")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"r"}`)
		w.Header().Set("X-Reply-Id", "after the status: not sent, not kept")
	})
	mw := dedupehttp.Middleware(dedupe.New(nil), telegram, dedupehttp.WithReplay("x-reply-id"), dedupehttp.WithReplayUnauthenticated(), dedupehttp.WithLogger(quiet))
	srv := serve(t, mw(handler))
	first := post(srv, update(9))
	require.NoError(t, first.err)
	again := post(srv, update(9))
	assert.Equal(t, http.StatusCreated, again.status)
	assert.Equal(t, first.body, again.body)
	assert.Equal(t, []string{"r-1", "r-2"}, again.header.Values("X-Reply-Id"))
	assert.Equal(t, first.header.Values("X-Reply-Id"), again.header.Values("X-Reply-Id"))
	assert.Empty(t, again.header.Get("X-Other"))
	assert.Equal(t, "replayed", again.verdict)
	assert.EqualValues(t, 1, calls.Load())
}

// TestReplayOffByDefault checks that a preset without Replay, and a custom
// extractor without WithReplay, answer copies as before.
func TestReplayOffByDefault(t *testing.T) {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	for name, h := range map[string]http.Handler{
		"telegram preset": dedupehttp.New(dedupe.New(nil), platform.Telegram, handler, dedupehttp.WithLogger(quiet)),
		"custom extractor": dedupehttp.Middleware(dedupe.New(nil), func(*http.Request) (dedupe.Key, error) {
			return dedupe.Key{Channel: "c", MessageID: "1"}, nil
		}, dedupehttp.WithLogger(quiet))(handler),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, "ok", deliver(h, update(3), nil).Body.String())
			w := deliver(h, update(3), nil)
			assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
			assert.Empty(t, w.Body.String())
		})
	}
	for _, p := range platform.Presets() {
		want := map[string]bool{"slack": true, "discord": true, "feishu": true,
			"wechat": true, "wecom": true, "dingtalk": true, "dingtalk-events": true}
		assert.Equal(t, want[p.Name], p.Replay, p.Name)
	}
}

// TestReplayNotAfterPanic checks that a handler that panicked after sending
// a 2xx status, whose message is marked, keeps no answer: what the platform
// got may be cut short, so its copies get the plain duplicate answer.
func TestReplayNotAfterPanic(t *testing.T) {
	c := shownAnswers(t)[0]
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", c.ctype)
		_, _ = io.WriteString(w, c.answer[:10])
		panic("cut short")
	})
	ep := dedupehttp.New(dedupe.New(nil), c.preset, h, dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
	first := deliver(ep, c.body, c.header)
	assert.Equal(t, c.answer[:10], first.Body.String())
	w := deliver(ep, c.body, c.header)
	assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
	assert.Empty(t, w.Body.String())
	assert.EqualValues(t, 1, calls.Load())
	assert.EqualValues(t, 1, ep.Stats().PanicsAfterSuccess)
}

// TestReplayIgnoredByAsync checks that an Async, which answers 202 before
// its handler runs, answers a copy of a message it processed as a plain
// duplicate, even for a preset with Replay and given WithReplay.
func TestReplayIgnoredByAsync(t *testing.T) {
	c := shownAnswers(t)[2] // Discord
	h := &answering{c: c}
	done := make(chan ended, 1)
	a := dedupehttp.NewAsync(dedupe.New(nil), dedupehttp.FromPreset(c.preset), h, dedupehttp.WithReplay(),
		dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet), dedupehttp.WithDone(doneTo(done)))
	t.Cleanup(func() { require.NoError(t, a.Close(context.Background())) })
	assert.Equal(t, http.StatusAccepted, deliver(a, c.body, c.header).Code)
	require.NoError(t, (<-done).err)
	w := deliver(a, c.body, c.header)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
	assert.Empty(t, w.Body.String())
	assert.EqualValues(t, 1, h.calls.Load())
}

// The recorder's limit is the stored result's: httpreplay sits under the root
// package and repeats its MaxResultSize as MaxSize.
func TestReplayLimitIsMaxResultSize(t *testing.T) {
	assert.Equal(t, dedupe.MaxResultSize, httpreplay.MaxSize)
}
