package dedupelog_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupelog"
	"github.com/gatewaykit/dedupe/idempotency"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/reply"
)

// records is a log sink that keeps each record rendered whole, as a JSON
// line: its attributes bound with With and its groups included.
type records struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *records) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

func (r *records) lines() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Split(strings.TrimSpace(r.buf.String()), "\n")
}

// logger returns a debug logger into r, masked in mode, and, for the
// check without masking, the same unmasked.
func (r *records) logger(mode dedupelog.Mode) *slog.Logger {
	h := slog.Handler(slog.NewJSONHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if mode != 0 {
		h = dedupelog.Mask(h, mode, []byte("a key of sixteen bytes or more"))
	}
	return slog.New(h)
}

// leaks returns the records that hold any of raw.
func leaks(lines []string, raw ...string) []string {
	var out []string
	for _, l := range lines {
		for _, s := range raw {
			if strings.Contains(l, s) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

// failingRelease is a store whose Release of the claims of id fails with
// an error that quotes the claim's key, as a store's errors do.
type failingRelease struct {
	dedupe.Store
	id string
}

func (f failingRelease) Release(ctx context.Context, c dedupe.Claim) error {
	if strings.Contains(c.Key.MessageID, f.id) {
		return fmt.Errorf("store: release %s: connection reset", c.Key)
	}
	return f.Store.Release(ctx, c)
}

// replyRecords sends replies under every path that logs, on the message
// ids.
func replyRecords(t *testing.T, log *slog.Logger, ids []string) {
	ctx := context.Background()
	unknown := errors.New("read tcp: connection reset by peer")
	store := failingRelease{dedupe.NewMemoryStore(dedupe.MemoryConfig{}), ids[0]}
	sendOK := func(context.Context, reply.Message) (string, error) { return "m1", nil }
	sendLost := func(context.Context, reply.Message) (string, error) { return "", unknown }
	key := func(i int) dedupe.Key { return dedupe.Key{Channel: "telegram", MessageID: ids[i]} }
	compose := func(context.Context) ([]byte, error) { return []byte("hi"), nil }

	// Success, and a lock the store does not release.
	s := reply.New(store, reply.Telegram, reply.WithLogger(log))
	_, err := s.Send(ctx, key(0), 0, compose, sendOK)
	require.NoError(t, err)
	// An unknown outcome, then the policy refusing to send again.
	_, err = s.Send(ctx, key(1), 0, compose, sendLost)
	require.Error(t, err)
	_, err = s.Send(ctx, key(1), 0, compose, sendOK)
	require.ErrorIs(t, err, reply.ErrMaybeLost)
	// An unknown outcome sent again at least once.
	again := reply.New(store, reply.Telegram, reply.WithLogger(log), reply.WithPolicy(reply.AtLeastOnce))
	_, err = again.Send(ctx, key(2), 0, compose, sendLost)
	require.Error(t, err)
	_, err = again.Send(ctx, key(2), 0, compose, sendOK)
	require.NoError(t, err)
	// An unknown outcome that the check finds sent.
	checked := reply.New(store, reply.Telegram, reply.WithLogger(log),
		reply.WithCheck(func(context.Context, reply.Message) (string, bool, error) { return "m2", true, nil }))
	_, err = checked.Send(ctx, key(3), 0, compose, sendLost)
	require.Error(t, err)
	_, err = checked.Send(ctx, key(3), 0, compose, sendOK)
	require.NoError(t, err)
	// In flight: another holds the reply's lock.
	held := dedupe.NewClaim(dedupe.Key{Channel: "dedupe.reply-lock", MessageID: "telegram:" + ids[4] + "#0"})
	_, err = store.Claim(ctx, held, time.Minute)
	require.NoError(t, err)
	_, err = s.Send(ctx, key(4), 0, compose, sendOK)
	require.ErrorIs(t, err, dedupe.ErrInFlight)
}

// eventsRecords delivers a signed WhatsApp batch whose status names the
// wamid but has no status, which cannot be keyed.
func eventsRecords(t *testing.T, log *slog.Logger, wamid string) {
	const secret = "mask-secret"
	body := []byte(`{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"messages",` +
		`"value":{"statuses":[{"id":"` + wamid + `","timestamp":"1700000000","recipient_id":"1"}]}}]}]}`)
	h := dedupehttp.Events(dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), dedupe.WithLogger(log)),
		platform.Meta.WithSecret(secret), func(*http.Request, platform.Event) error { return nil },
		dedupehttp.WithLogger(log))
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	t.Logf("events: %d %s", w.Code, strings.TrimSpace(w.Body.String()))
}

// idempotencyRecords sends a request with an Idempotency-Key, its retry,
// and one whose handler fails, through a Deduper that logs.
func idempotencyRecords(t *testing.T, log *slog.Logger, key string) []string {
	d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), dedupe.WithLogger(log))
	t.Cleanup(func() { _ = d.Close() })
	fail := false
	h := idempotency.Middleware(d)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if fail {
			panic("the handler failed")
		}
		w.WriteHeader(http.StatusCreated)
	}))
	for _, f := range []bool{false, false, true} {
		fail = f
		r := httptest.NewRequest(http.MethodPost, "/v1/messages", strings.NewReader("x"))
		r.Header.Set("Idempotency-Key", `"`+key+`"`)
		if f {
			r.Header.Set("Idempotency-Key", `"`+key+`-2"`)
		}
		func() {
			defer func() { _ = recover() }()
			h.ServeHTTP(httptest.NewRecorder(), r)
		}()
	}
	// The middleware stores the SHA-256 of the scope and the key: its
	// records' keys hold that, which is the message id to hide.
	sum := sha256.Sum256(append([]byte{0, byte(len(key))}, key...)) // uvarint lengths: "" and the key
	return []string{key, hex.EncodeToString(sum[:])}
}

// TestMaskEveryPackage captures every record that reply (a success, a lock
// the store does not release, unknown outcomes refused, sent again and
// found by the check, a reply in flight), dedupehttp's Events (a batch with
// an event that cannot be keyed) and idempotency (through its Deduper) log,
// rendered whole (attributes bound with With, groups), with Mask on: no
// record holds a raw id, a key or the lock key quoting them. Before Mask
// reached the attributes bound with With, the field err and the key errors,
// 4 of the 7 reply records (the three logged through With, the store error
// under err) and the 1 Events record held a raw id.
func TestMaskEveryPackage(t *testing.T) {
	ids := []string{"5550101", "5550102", "5550103", "5550104", "5550105"}
	const wamid = "wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI0MzA0QjQ1RjU5ODQ1RTBCMEIA"
	const idemKey = "8e03978e-40d5-43e8-bc93-6894a57f9324"
	raw := append([]string{wamid, idemKey}, ids...)

	var plain records
	replyRecords(t, plain.logger(0), ids)
	eventsRecords(t, plain.logger(0), wamid)
	require.NotEmpty(t, leaks(plain.lines(), raw...), "without Mask the records hold the ids: the test sees them")

	for name, mode := range map[string]dedupelog.Mode{"Hash": dedupelog.Hash, "Drop": dedupelog.Drop} {
		t.Run(name, func(t *testing.T) {
			var replyLog, eventsLog, idemLog records
			replyRecords(t, replyLog.logger(mode), ids)
			eventsRecords(t, eventsLog.logger(mode), wamid)
			idem := idempotencyRecords(t, idemLog.logger(mode), idemKey)

			for name, rec := range map[string]*records{"reply": &replyLog, "events": &eventsLog, "idempotency": &idemLog} {
				lines := rec.lines()
				bad := leaks(lines, append(raw, idem...)...)
				t.Logf("%s: %d records, %d hold a raw id", name, len(lines), len(bad))
				assert.Empty(t, bad, "%s records hold a raw id", name)
			}
			for _, msg := range []string{"lock not released", "outcome unknown\"", "possibly lost", "possibly duplicated", "check found"} {
				assert.NotEmpty(t, leaks(replyLog.lines(), msg), "reply logs %q", msg)
			}
			assert.Len(t, leaks(eventsLog.lines(), "without a usable key"), 1, "the Events record:\n%s", strings.Join(eventsLog.lines(), "\n"))
			assert.Contains(t, eventsLog.buf.String(), "dedupe: no message id [detail hidden]")
			assert.NotEmpty(t, leaks(idemLog.lines(), `"platform":"idem"`), "idempotency's Deduper logs its keys")
		})
	}
}

// TestMaskWithAttrsAndGroups: attributes bound with With, in groups, and an
// error bound before the record are masked with the message they name, and
// the record's own fields with the message bound.
func TestMaskWithAttrsAndGroups(t *testing.T) {
	var rec records
	log := rec.logger(dedupelog.Hash)
	l := log.With("key", "telegram:777001").WithGroup("req").With(slog.Group("inner", "message_id", "777001"))
	l.Warn("bound", "err", errors.New("store: get dedupe.reply-lock:telegram:777001#0: timeout"),
		slog.Group("g", "error", "telegram:777001 failed"))
	log.WithGroup("g").With("key", "line:U999888").Info("grouped", "panic", "id U999888")
	log.Info("plain", "error", fmt.Errorf("event 3: %w: id %q too long", dedupe.ErrInvalidKey, "U123456789"))
	lines := rec.lines()
	require.Len(t, lines, 3)
	assert.Empty(t, leaks(lines, "777001", "U999888", "U123456789"), "%s", strings.Join(lines, "\n"))
	assert.Contains(t, lines[0], `"key":"telegram:`)
	assert.Contains(t, lines[0], `dedupe.reply-lock:telegram:`)
	assert.Contains(t, lines[2], `"error":"dedupe: invalid key [detail hidden]"`)
}
