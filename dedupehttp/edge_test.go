package dedupehttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// clock is the time of the deliveries in these tests.
var clock = time.Unix(1764448112, 0)

func at() time.Time { return clock }

// recordingStore is a memory store that counts the calls that write.
type recordingStore struct {
	*dedupe.MemoryStore
	writes atomic.Int64
	mu     sync.Mutex
	ttls   map[dedupe.Key]time.Duration
}

func newRecordingStore() *recordingStore {
	return &recordingStore{MemoryStore: dedupe.NewMemoryStore(dedupe.MemoryConfig{}), ttls: map[dedupe.Key]time.Duration{}}
}

func (s *recordingStore) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	s.writes.Add(1)
	return s.MemoryStore.Claim(ctx, c, lease)
}

func (s *recordingStore) Mark(ctx context.Context, k dedupe.Key, ttl time.Duration) error {
	s.writes.Add(1)
	s.mu.Lock()
	s.ttls[k] = ttl
	s.mu.Unlock()
	return s.MemoryStore.Mark(ctx, k, ttl)
}

func (s *recordingStore) Release(ctx context.Context, c dedupe.Claim) error {
	s.writes.Add(1)
	return s.MemoryStore.Release(ctx, c)
}

func (s *recordingStore) ttl(k dedupe.Key) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ttls[k]
}

func platformFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "platform", "testdata", name))
	require.NoError(t, err)
	return b
}

// deliver serves body with header through h in memory.
func deliver(h http.Handler, body []byte, header http.Header) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// seen is what a handler saw of one request.
type seen struct {
	body    []byte
	key     dedupe.Key
	verdict dedupehttp.Verdict
}

// recorder is a handler that records what it sees and answers 200.
type recorder struct {
	mu   sync.Mutex
	seen []seen
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	if r.ContentLength >= 0 && r.ContentLength != int64(len(b)) {
		http.Error(w, "Content-Length is not the body's", http.StatusInternalServerError)
		return
	}
	k, v := dedupehttp.KeyFrom(r.Context())
	rec.mu.Lock()
	rec.seen = append(rec.seen, seen{b, k, v})
	rec.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (rec *recorder) calls() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seen(nil), rec.seen...)
}

// TestForgedThenReal sends, for each platform, forged deliveries and then
// the real one: the forgeries get 401 and write nothing to the store; the
// real one is processed once, and its redelivery is a duplicate.
func TestForgedThenReal(t *testing.T) {
	cases := []struct {
		preset  platform.Preset
		fixture string
		key     string
	}{
		{platform.Telegram, "telegram_message.json", "912345678"},
		{platform.Slack, "slack_event_callback.json", "Ev08MFMKH6"},
		{platform.Feishu, "feishu_message_push1.json", "om_5ce6d572455d361153b7cb51da133945"},
		{platform.Discord, "discord_application_command.json", "1187654321098765432"},
		{platform.OneBot, "onebot_group_message.json", "3170000123:-2117483012"},
		{platform.QQ, "qq_group_at_message.json", "GROUP_AT_MESSAGE_CREATE:ot3lpp6cmlvqxuhuaxkeg6tyg6wa4ubyjc1vv4z3agmb6qdczc7vdpgfcmfwm"},
	}
	for _, c := range cases {
		t.Run(c.preset.Name, func(t *testing.T) {
			signer := platformtest.NewSigner(c.preset.Name, "real-secret-"+c.preset.Name)
			forger := platformtest.NewSigner(c.preset.Name, "guessed-secret")
			plain := platformFixture(t, c.fixture)
			body, forgedBody := plain, plain
			if c.preset.Name == "feishu" {
				body, forgedBody = signer.Encrypt(plain), forger.Encrypt(plain)
			}
			store := newRecordingStore()
			var logs logBuffer
			rec := &recorder{}
			h := dedupehttp.New(dedupe.New(store), signer.Preset(c.preset), rec,
				dedupehttp.WithClock(at), dedupehttp.WithLogger(logs.logger()))

			for name, forged := range map[string]http.Header{
				"unsigned":       {"Content-Type": {"application/json"}},
				"guessed secret": forger.Sign(forgedBody, clock),
			} {
				w := deliver(h, forgedBody, forged)
				assert.Equal(t, http.StatusUnauthorized, w.Code, name)
				assert.Equal(t, "unauthenticated", w.Header().Get(dedupehttp.HeaderVerdict), name)
			}
			assert.Zero(t, store.writes.Load(), "a forged delivery wrote to the store")
			assert.Zero(t, store.Len())
			assert.Empty(t, rec.calls())

			want := dedupe.Key{Channel: c.preset.Name, MessageID: c.key}
			w := deliver(h, body, signer.Sign(body, clock))
			assert.Equal(t, http.StatusOK, w.Code)
			again := deliver(h, body, signer.Sign(body, clock.Add(time.Second)))
			assert.Equal(t, "duplicate", again.Header().Get(dedupehttp.HeaderVerdict))
			calls := rec.calls()
			require.Len(t, calls, 1, "processed once")
			assert.Equal(t, plain, calls[0].body, "the handler reads the authenticated (decrypted) body")
			assert.Equal(t, want, calls[0].key)
			assert.Equal(t, dedupehttp.VerdictNew, calls[0].verdict)
			exists, err := store.Exists(t.Context(), want)
			require.NoError(t, err)
			assert.True(t, exists)

			assert.Equal(t, dedupehttp.Stats{Unauthenticated: 2}, h.Stats())
			assert.NotContains(t, logs.String(), signer.Secret(), "a log holds the secret")
			assert.Contains(t, logs.String(), "unauthenticated delivery refused")
		})
	}
}

// TestSlackStaleTimestampRefused replays a correctly signed Slack delivery
// six minutes later.
func TestSlackStaleTimestampRefused(t *testing.T) {
	signer := platformtest.NewSigner("slack", "signing-secret")
	body := platformFixture(t, "slack_event_callback.json")
	store := newRecordingStore()
	rec := &recorder{}
	h := dedupehttp.New(dedupe.New(store), signer.Preset(platform.Slack), rec,
		dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
	w := deliver(h, body, signer.Sign(body, clock.Add(-6*time.Minute)))
	assert.Equal(t, http.StatusUnauthorized, w.Code)
	assert.Zero(t, store.writes.Load())
	assert.Equal(t, http.StatusOK, deliver(h, body, signer.Sign(body, clock)).Code)
	assert.Len(t, rec.calls(), 1)
}

// TestRefusingHandlerLeavesMessageUnmarked checks that a handler answering
// 401, 403 or 400 (checking a secret itself, say) leaves the message to the
// next delivery.
func TestRefusingHandlerLeavesMessageUnmarked(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusBadRequest} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			var calls atomic.Int32
			h := dedupehttp.New(dedupe.New(nil), platform.Telegram, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Telegram-Bot-Api-Secret-Token") != "right" {
					w.WriteHeader(status)
					return
				}
				calls.Add(1)
			}), dedupehttp.WithLogger(quiet))
			assert.Equal(t, status, deliver(h, update(5001), nil).Code)
			real := http.Header{"X-Telegram-Bot-Api-Secret-Token": {"right"}}
			w := deliver(h, update(5001), real)
			assert.Equal(t, http.StatusOK, w.Code)
			assert.Empty(t, w.Header().Get(dedupehttp.HeaderVerdict), "processed, not a duplicate")
			assert.EqualValues(t, 1, calls.Load())
		})
	}
}

// TestOneDeduperManyPresets checks that one Deduper serves two presets, each
// marking with its own TTL.
func TestOneDeduperManyPresets(t *testing.T) {
	store := newRecordingStore()
	d := dedupe.New(store)
	tg := dedupehttp.New(d, platform.Telegram, &recorder{}, dedupehttp.WithLogger(quiet))
	sl := dedupehttp.New(d, platform.Slack, &recorder{}, dedupehttp.WithLogger(quiet))
	require.Equal(t, http.StatusOK, deliver(tg, update(1), nil).Code)
	require.Equal(t, http.StatusOK, deliver(sl, []byte(`{"type":"event_callback","event_id":"Ev1"}`), nil).Code)
	assert.Equal(t, platform.Telegram.TTL, store.ttl(dedupe.Key{Channel: "telegram", MessageID: "1"}))
	assert.Equal(t, platform.Slack.TTL, store.ttl(dedupe.Key{Channel: "slack", MessageID: "Ev1"}))
	assert.EqualValues(t, 2, d.Stats().Processed, "the counters are shared")
	assert.Equal(t, "telegram", tg.Name())
}

// TestQQValidationAnsweredByMiddleware sends QQ's published callback URL
// validation to a QQ endpoint: the middleware answers it with the secret.
func TestQQValidationAnsweredByMiddleware(t *testing.T) {
	rec := &recorder{}
	store := newRecordingStore()
	h := dedupehttp.New(dedupe.New(store), platform.QQ.WithSecret("DG5g3B4j9X2KOErG"), rec, dedupehttp.WithLogger(quiet))
	w := deliver(h, []byte(`{"d":{"plain_token":"Arq0D5A61EgUu4OxUvOp","event_ts":"1725442341"},"op":13}`),
		http.Header{"User-Agent": {"QQBot-Callback"}, "X-Bot-Appid": {"11111111"}})
	assert.Equal(t, http.StatusOK, w.Code)
	assert.JSONEq(t, `{"plain_token":"Arq0D5A61EgUu4OxUvOp","signature":"87befc99c42c651b3aac0278e71ada338433ae26fcb24307bdc5ad38c1adc2d01bcfcadc0842edac85e85205028a1132afe09280305f13aa6909ffc2d652c706"}`, w.Body.String())
	assert.Empty(t, rec.calls())
	assert.Zero(t, store.writes.Load())
	assert.Equal(t, dedupehttp.Stats{Protocol: 1}, h.Stats())
}

// TestUnauthenticatedEndpointWarning checks the warning logged once when an
// endpoint is built: no secret, a secret that cannot work, a custom
// extractor without WithVerify; and none with a secret.
func TestUnauthenticatedEndpointWarning(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(l dedupehttp.Option)
		level string
	}{
		{"no secret", func(l dedupehttp.Option) { dedupehttp.New(dedupe.New(nil), platform.Telegram, &recorder{}, l) }, "WARN"},
		{"bad secret", func(l dedupehttp.Option) {
			dedupehttp.New(dedupe.New(nil), platform.Discord.WithSecret("not-a-key"), &recorder{}, l)
		}, "ERROR"},
		{"middleware", func(l dedupehttp.Option) { dedupehttp.Middleware(dedupe.New(nil), telegram, l) }, "WARN"},
		{"secret", func(l dedupehttp.Option) {
			dedupehttp.New(dedupe.New(nil), platform.Telegram.WithSecret("s"), &recorder{}, l)
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			tc.build(dedupehttp.WithLogger(logs.logger()))
			recs := logs.records(t)
			if tc.level == "" {
				assert.Empty(t, recs)
				return
			}
			require.Len(t, recs, 1)
			assert.Equal(t, tc.level, recs[0]["level"])
		})
	}
}

// TestUndeduplicatedCountedLoggedAndRefusable sends deliveries that have no
// usable id and are not protocol requests: they are counted and logged at
// warn level (once a minute), and refused with 400 when asked.
func TestUndeduplicatedCountedLoggedAndRefusable(t *testing.T) {
	feishuEncrypted := platformFixture(t, "feishu_encrypted.json")
	for _, tc := range []struct {
		preset platform.Preset
		body   []byte
	}{
		{platform.Feishu, feishuEncrypted}, // no Encrypt Key configured
		{platform.OneBot, []byte(`{"post_type":"message","message_id":42}`)},
		{platform.QQ, []byte(`{"op":0,"t":"C2C_MESSAGE_CREATE","d":{"id":"m1"}}`)},
	} {
		t.Run(tc.preset.Name, func(t *testing.T) {
			var logs logBuffer
			rec := &recorder{}
			h := dedupehttp.New(dedupe.New(nil), tc.preset, rec, dedupehttp.WithLogger(logs.logger()))
			for range 3 {
				w := deliver(h, tc.body, nil)
				assert.Equal(t, http.StatusOK, w.Code)
			}
			assert.Len(t, rec.calls(), 3, "served")
			assert.Equal(t, dedupehttp.VerdictUndeduplicated, rec.calls()[0].verdict)
			assert.EqualValues(t, 3, h.Stats().Undeduplicated)
			assert.Equal(t, 1, strings.Count(logs.String(), "not deduplicated"), "rate-limited warning")

			strict := dedupehttp.New(dedupe.New(nil), tc.preset, rec, dedupehttp.WithRefuseUndeduplicated(), dedupehttp.WithLogger(quiet))
			w := deliver(strict, tc.body, nil)
			assert.Equal(t, http.StatusBadRequest, w.Code)
			assert.Equal(t, "undeduplicated", w.Header().Get(dedupehttp.HeaderVerdict))
			assert.EqualValues(t, 1, strict.Stats().Undeduplicated)
			assert.Len(t, rec.calls(), 3, "refused")
		})
	}
	// A protocol request is neither counted as undeduplicated nor refused.
	strict := dedupehttp.New(dedupe.New(nil), platform.Slack, &recorder{}, dedupehttp.WithRefuseUndeduplicated(), dedupehttp.WithLogger(quiet))
	assert.Equal(t, http.StatusOK, deliver(strict, platformFixture(t, "slack_url_verification.json"), nil).Code)
	assert.Equal(t, dedupehttp.Stats{Protocol: 1}, strict.Stats())
}

// TestCollisionsGoneThroughMiddleware sends the colliding bodies: each
// is processed as its own message or refused, never dropped as another's
// duplicate.
func TestCollisionsGoneThroughMiddleware(t *testing.T) {
	rec := &recorder{}
	h := dedupehttp.New(dedupe.New(nil), platform.Telegram, rec, dedupehttp.WithLogger(quiet))
	assert.Equal(t, http.StatusOK, deliver(h, []byte(`{"update_id":4,"UPDATE_ID":5}`), nil).Code)
	w := deliver(h, []byte(`{"update_id":5}`), nil)
	assert.Empty(t, w.Header().Get(dedupehttp.HeaderVerdict), "update 5 is not a duplicate of update 4")
	assert.Equal(t, http.StatusBadRequest, deliver(h, []byte("{\"update_id\":\"\xff\\u0031\"}"), nil).Code)
	assert.Equal(t, http.StatusBadRequest, deliver(h, []byte("{\"update_id\":\"\xfe\\u0031\"}"), nil).Code)
	assert.Len(t, rec.calls(), 2)

	ob := dedupehttp.New(dedupe.New(nil), platform.OneBot, rec, dedupehttp.WithLogger(quiet))
	assert.Equal(t, http.StatusBadRequest, deliver(ob, []byte(`{"post_type":"message","self_id":"1:2","message_id":3}`), nil).Code)
	assert.Equal(t, http.StatusOK, deliver(ob, []byte(`{"post_type":"message","self_id":1,"message_id":"2:3"}`), nil).Code)
	assert.Equal(t, dedupe.Key{Channel: "onebot", MessageID: "1:2:3"}, rec.calls()[2].key)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAsyncVerifies checks that an Async given WithVerify refuses a forgery
// before claiming, and queues the real delivery with its decrypted body.
func TestAsyncVerifies(t *testing.T) {
	signer := platformtest.NewSigner("feishu", "encrypt-key")
	store := newRecordingStore()
	got := make(chan seen, 1)
	a := dedupehttp.NewAsync(dedupe.New(store), dedupehttp.FromPreset(platform.Feishu), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := dedupehttp.Body(r)
		k, v := dedupehttp.KeyFrom(r.Context())
		got <- seen{b, k, v}
	}), dedupehttp.WithVerify(signer.Preset(platform.Feishu)), dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
	plain := platformFixture(t, "feishu_message_push1.json")
	body := signer.Encrypt(plain)
	assert.Equal(t, http.StatusUnauthorized, deliver(a, body, nil).Code)
	assert.Zero(t, store.writes.Load())
	assert.Equal(t, http.StatusAccepted, deliver(a, body, signer.Sign(body, clock)).Code)
	s := <-got
	assert.Equal(t, plain, s.body)
	assert.Equal(t, "om_5ce6d572455d361153b7cb51da133945", s.key.MessageID)
	assert.Equal(t, dedupehttp.VerdictNew, s.verdict)
	require.NoError(t, a.Close(t.Context()))
	assert.Equal(t, dedupehttp.Stats{Unauthenticated: 1}, a.Stats())
}
