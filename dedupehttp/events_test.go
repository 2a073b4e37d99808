package dedupehttp_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
)

// The payloads are platform/testdata's, from the platforms' docs (see
// platform.LINE and platform.Meta): LINE
// https://developers.line.biz/en/reference/messaging-api/#webhook-event-objects,
// WhatsApp https://developers.facebook.com/docs/whatsapp/cloud-api/webhooks/payload-examples,
// Messenger https://developers.facebook.com/docs/messenger-platform/reference/webhook-events.

const eventsSecret = "batch-secret"

// linePreset is LINE with its secret, and copies that do not wait.
func linePreset() platform.Preset {
	p := platform.LINE.WithSecret(eventsSecret)
	p.AckBudget = 0
	return p
}

// testdata returns a payload of platform/testdata.
func testdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "platform", "testdata", name))
	require.NoError(t, err)
	return b
}

// deliverBatch posts body to h signed with secret as LINE
// (X-Line-Signature) and Meta (X-Hub-Signature-256) sign, and returns the
// answer.
func deliverBatch(h http.Handler, body []byte, secret string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	sign(r, body, secret)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// sign signs r, whose body is body, with secret as LINE and Meta do.
func sign(r *http.Request, body []byte, secret string) {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	sum := mac.Sum(nil)
	r.Header.Set("X-Line-Signature", base64.StdEncoding.EncodeToString(sum))
	r.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(sum))
}

// eventLog counts the runs of each event id: the successful ones, and all.
type eventLog struct {
	mu        sync.Mutex
	succeeded map[string]int
	attempts  map[string]int
}

func newEventLog() *eventLog {
	return &eventLog{succeeded: map[string]int{}, attempts: map[string]int{}}
}

func (l *eventLog) ran(id string, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.attempts[id]++
	if ok {
		l.succeeded[id]++
	}
}

// stores returns the real stores the batch tests run on.
func stores(t *testing.T) map[string]func(t *testing.T) dedupe.Store {
	return map[string]func(t *testing.T) dedupe.Store{
		"memory": func(*testing.T) dedupe.Store { return dedupe.NewMemoryStore(dedupe.MemoryConfig{}) },
		"sqlite": func(t *testing.T) dedupe.Store {
			st, err := dedupe.OpenSQLite(filepath.Join(t.TempDir(), "dedupe.db"), dedupe.SQLiteConfig{})
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			return st
		},
	}
}

// TestEventsRedeliveredBatch delivers a LINE and a Meta batch whose
// handler fails on one event (an error) and panics on another the first
// time, then redelivers it (LINE: isRedelivery true, in another order),
// then once more. Every event succeeds exactly once; only the two failed
// ones run twice; the first answer is 500, the second 200, the third a
// duplicate.
func TestEventsRedeliveredBatch(t *testing.T) {
	batches := map[string]struct {
		preset      platform.Preset
		first, redo []byte
		failing     []string // the event that fails, and the one that panics
	}{
		"line": {linePreset(), testdata(t, "line_events.json"), testdata(t, "line_events_redelivery.json"),
			[]string{"01FZ74ASS536FW97EX38NKCZQK", "01FZ74B5Y0F4TNKA5SCAVKPEDM"}},
		"whatsapp": {platform.Meta.WithSecret(eventsSecret), testdata(t, "meta_whatsapp.json"), testdata(t, "meta_whatsapp.json"),
			[]string{"message:wamid.HBgLMTY1MDM4Nzk0MzkVAgASGBQzQUQ1OEQ1RDRDNEYzQjgwMkZCRgA=",
				"status:wamid.HBgLMTY1MDM4Nzk0MzkVAgARGBI0MzA0QjQ1RjU5ODQ1RTBCMEIA:delivered"}},
		"messenger": {platform.Meta.WithSecret(eventsSecret), testdata(t, "meta_messenger.json"), testdata(t, "meta_messenger.json"),
			[]string{"message:m_1457764197618:41d102a3e1ae206a38", "event:read:1254459154682919:1458668856463"}},
	}
	for storeName, open := range stores(t) {
		for name, b := range batches {
			t.Run(storeName+"/"+name, func(t *testing.T) {
				evs, err := b.preset.Events(b.first, nil)
				require.NoError(t, err)
				require.GreaterOrEqual(t, len(evs), 3)
				log := newEventLog()
				var firstRound atomic.Bool
				firstRound.Store(true)
				h := dedupehttp.Events(dedupe.New(open(t)), b.preset, func(r *http.Request, ev platform.Event) error {
					key, verdict := dedupehttp.KeyFrom(r.Context())
					assert.Equal(t, ev.Key(b.preset), key)
					assert.Equal(t, dedupehttp.VerdictNew, verdict)
					if firstRound.Load() {
						switch ev.ID {
						case b.failing[0]:
							log.ran(ev.ID, false)
							return errors.New("downstream refused")
						case b.failing[1]:
							log.ran(ev.ID, false)
							panic("event handler bug")
						}
					}
					log.ran(ev.ID, true)
					return nil
				}, dedupehttp.WithLogger(quiet))

				w := deliverBatch(h, b.first, eventsSecret)
				assert.Equal(t, http.StatusInternalServerError, w.Code, w.Body.String())
				assert.Equal(t, "failed", w.Header().Get(dedupehttp.HeaderVerdict))
				assert.Contains(t, w.Body.String(), fmt.Sprintf("2 of %d events failed", len(evs)))

				firstRound.Store(false)
				w = deliverBatch(h, b.redo, eventsSecret)
				assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
				assert.Equal(t, "{}", w.Body.String())
				assert.Empty(t, w.Header().Get(dedupehttp.HeaderVerdict))

				w = deliverBatch(h, b.redo, eventsSecret)
				assert.Equal(t, http.StatusOK, w.Code)
				assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))

				log.mu.Lock()
				defer log.mu.Unlock()
				require.Len(t, log.succeeded, len(evs))
				for _, ev := range evs {
					assert.Equal(t, 1, log.succeeded[ev.ID], "successful runs of %s", ev.ID)
					want := 1
					if ev.ID == b.failing[0] || ev.ID == b.failing[1] {
						want = 2
					}
					assert.Equal(t, want, log.attempts[ev.ID], "runs of %s", ev.ID)
				}
			})
		}
	}
}

// countingStore is a real store that counts the calls made to it.
type countingStore struct {
	dedupe.Store
	calls atomic.Int64
}

func (s *countingStore) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	s.calls.Add(1)
	return s.Store.Claim(ctx, c, lease)
}

func (s *countingStore) Mark(ctx context.Context, k dedupe.Key, ttl time.Duration) error {
	s.calls.Add(1)
	return s.Store.Mark(ctx, k, ttl)
}

func (s *countingStore) Exists(ctx context.Context, k dedupe.Key) (bool, error) {
	s.calls.Add(1)
	return s.Store.Exists(ctx, k)
}

// TestEventsForgedBatch sends LINE batches with a wrong secret, without
// one, and a tampered copy: each is answered 401, no handler runs, and the
// store is never called. The genuine batch then runs every event.
func TestEventsForgedBatch(t *testing.T) {
	store := &countingStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	d := dedupe.New(store)
	p := linePreset()
	var runs atomic.Int64
	h := dedupehttp.Events(d, p, func(*http.Request, platform.Event) error {
		runs.Add(1)
		return nil
	}, dedupehttp.WithLogger(quiet))
	body := testdata(t, "line_events.json")
	var observed []dedupehttp.Outcome
	tampered := bytes.Replace(body, []byte("Hello, world"), []byte("Hello, World"), 1)
	forgeries := map[string]func(r *http.Request){
		"wrong secret":   func(r *http.Request) { sign(r, body, "wrong") },
		"no signature":   func(*http.Request) {},
		"tampered body":  func(r *http.Request) { sign(r, body, eventsSecret); r.Body = io.NopCloser(bytes.NewReader(tampered)) },
		"another body's": func(r *http.Request) { sign(r, testdata(t, "line_verification.json"), eventsSecret) },
	}
	for name, forge := range forgeries {
		r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
		r = r.WithContext(dedupehttp.ContextWithObserver(r.Context(), func(o dedupehttp.Outcome) { observed = append(observed, o) }))
		forge(r)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusUnauthorized, w.Code, name)
		assert.Equal(t, "unauthenticated", w.Header().Get(dedupehttp.HeaderVerdict), name)
	}
	assert.Equal(t, []dedupehttp.Outcome{{}, {}, {}, {}}, observed, "one empty outcome per refused request")
	assert.Zero(t, runs.Load())
	assert.Zero(t, store.calls.Load(), "store calls for forged batches")
	assert.Equal(t, uint64(4), h.Stats().Unauthenticated)

	w := deliverBatch(h, body, eventsSecret)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, int64(3), runs.Load())
}

// TestEventsLargeBatch delivers one batch of 600 events, more than any
// store sends in one round trip (SQLite's group commit takes 128 calls,
// the Redis and PostgreSQL batches fewer), twice: each event runs once.
func TestEventsLargeBatch(t *testing.T) {
	const n = 600
	var body bytes.Buffer
	body.WriteString(`{"destination":"U0","events":[`)
	for i := range n {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"type":"message","webhookEventId":"01LARGE%05d","deliveryContext":{"isRedelivery":false},"message":{"type":"text","text":"%d"}}`, i, i)
	}
	body.WriteString(`]}`)
	for storeName, open := range stores(t) {
		t.Run(storeName, func(t *testing.T) {
			log := newEventLog()
			p := linePreset()
			h := dedupehttp.Events(dedupe.New(open(t)), p, func(_ *http.Request, ev platform.Event) error {
				log.ran(ev.ID, true)
				return nil
			}, dedupehttp.WithLogger(quiet))
			w := deliverBatch(h, body.Bytes(), eventsSecret)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			w = deliverBatch(h, body.Bytes(), eventsSecret)
			require.Equal(t, http.StatusOK, w.Code, w.Body.String())
			assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
			require.Len(t, log.succeeded, n)
			for id, runs := range log.succeeded {
				assert.Equal(t, 1, runs, id)
			}
		})
	}
}

// jsonLineEvents finds the events of a LINE body by webhookEventId, without
// checking them as platform.LINE does: ids that cannot be keys get through.
func jsonLineEvents(body []byte) ([]platform.Event, error) {
	var d struct {
		Events []struct {
			ID string `json:"webhookEventId"`
		} `json:"events"`
	}
	err := json.Unmarshal(body, &d)
	evs := make([]platform.Event, len(d.Events))
	for i, ev := range d.Events {
		evs[i] = platform.Event{ID: ev.ID}
	}
	return evs, err
}

// TestEventsInvalidIDAlone delivers a LINE batch of four events, two with
// an id that cannot be a key (invalid UTF-8; empty): the two others run,
// the invalid ones are refused alone (counted, no outcome key), and the
// delivery is answered 200, since a redelivery would be refused again. A
// redelivery runs nothing again.
func TestEventsInvalidIDAlone(t *testing.T) {
	body := []byte(`{"destination":"U0","events":[` +
		`{"type":"message","webhookEventId":"01GOOD1"},` +
		`{"type":"message","webhookEventId":"01BAD` + "\xff" + `"},` +
		`{"type":"message","webhookEventId":"01GOOD2"},` +
		`{"type":"message","webhookEventId":""}]}`)
	p := linePreset()
	p.Events = func(body []byte, h http.Header) ([]platform.Event, error) { // encoding/json would replace \xff
		evs, err := jsonLineEvents(bytes.ReplaceAll(body, []byte("\xff"), []byte("@")))
		for i := range evs {
			evs[i].ID = strings.ReplaceAll(evs[i].ID, "@", "\xff")
		}
		return evs, err
	}
	log := newEventLog()
	h := dedupehttp.Events(dedupe.New(nil), p, func(_ *http.Request, ev platform.Event) error {
		log.ran(ev.ID, true)
		return nil
	}, dedupehttp.WithLogger(quiet))
	for round := range 2 {
		var observed []dedupehttp.Outcome
		r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
		sign(r, body, eventsSecret)
		r = r.WithContext(dedupehttp.ContextWithObserver(r.Context(), func(o dedupehttp.Outcome) { observed = append(observed, o) }))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, "{}", w.Body.String())
		require.Len(t, observed, 4)
		verdict := []dedupehttp.Verdict{dedupehttp.VerdictNew, dedupehttp.VerdictDuplicate}[round]
		assert.Equal(t, verdict, observed[0].Verdict)
		assert.Equal(t, verdict, observed[2].Verdict)
		assert.Equal(t, dedupehttp.Outcome{}, observed[1])
		assert.Equal(t, dedupehttp.Outcome{}, observed[3])
	}
	assert.Equal(t, map[string]int{"01GOOD1": 1, "01GOOD2": 1}, log.succeeded)
	assert.Equal(t, uint64(4), h.Stats().Malformed)
}

// TestEventsInFlightElsewhere holds one event of a LINE batch in another
// request's handler: the batch runs its other events and is answered 503
// with Retry-After ([dedupehttp.WithInFlight]'s default); once the first
// request is done, the redelivery runs nothing again and is answered 200.
func TestEventsInFlightElsewhere(t *testing.T) {
	p := linePreset()
	body := testdata(t, "line_events.json")
	evs, err := p.Events(body, nil)
	require.NoError(t, err)
	alone := []byte(`{"destination":"xxxxxxxxxx","events":[` + string(evs[1].Raw) + `]}`)

	log := newEventLog()
	entered, release := make(chan struct{}), make(chan struct{})
	h := dedupehttp.Events(dedupe.New(nil), p, func(r *http.Request, ev platform.Event) error {
		if r.Header.Get("X-Hold") != "" {
			close(entered)
			<-release
		}
		log.ran(ev.ID, true)
		return nil
	}, dedupehttp.WithLogger(quiet))
	first := make(chan int)
	go func() {
		r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(alone))
		sign(r, alone, eventsSecret)
		r.Header.Set("X-Hold", "1")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		first <- w.Code
	}()
	<-entered
	w := deliverBatch(h, body, eventsSecret)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "in_flight", w.Header().Get(dedupehttp.HeaderVerdict))
	assert.NotEmpty(t, w.Header().Get("Retry-After"))
	close(release)
	assert.Equal(t, http.StatusOK, <-first)

	w = deliverBatch(h, body, eventsSecret)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
	assert.Equal(t, map[string]int{evs[0].ID: 1, evs[1].ID: 1, evs[2].ID: 1}, log.succeeded)
}

// TestEventsProtocolAndMalformed: LINE's URL verification (an empty
// events[]) is answered 200 without touching the handler; a body that is
// not the platform's JSON 400; a protocol request the Events func reports
// 200 with the protocol verdict; a preset without Events 500.
func TestEventsProtocolAndMalformed(t *testing.T) {
	p := linePreset()
	var runs atomic.Int64
	handle := func(*http.Request, platform.Event) error { runs.Add(1); return nil }
	h := dedupehttp.Events(dedupe.New(nil), p, handle, dedupehttp.WithLogger(quiet))

	w := deliverBatch(h, testdata(t, "line_verification.json"), eventsSecret)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "{}", w.Body.String())

	w = deliverBatch(h, []byte(`{"events":`), eventsSecret)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Equal(t, uint64(1), h.Stats().Malformed)

	p.Events = func([]byte, http.Header) ([]platform.Event, error) { return nil, platform.ErrNotAMessage }
	h = dedupehttp.Events(dedupe.New(nil), p, handle, dedupehttp.WithLogger(quiet))
	w = deliverBatch(h, []byte(`{}`), eventsSecret)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "protocol", w.Header().Get(dedupehttp.HeaderVerdict))
	assert.Equal(t, uint64(1), h.Stats().Protocol)

	var logs logBuffer
	p.Events = nil
	h = dedupehttp.Events(dedupe.New(nil), p, handle, dedupehttp.WithLogger(logs.logger()))
	assert.Contains(t, logs.buf.String(), "has no Events func")
	w = deliverBatch(h, update(1), eventsSecret)
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Zero(t, runs.Load())
}

// TestEventsObserver: the observer learns one outcome per event, with its
// key, verdict and decision result, and the failed event's error.
func TestEventsObserver(t *testing.T) {
	p := linePreset()
	body := testdata(t, "line_events.json")
	evs, err := p.Events(body, nil)
	require.NoError(t, err)
	h := dedupehttp.Events(dedupe.New(nil), p, func(_ *http.Request, ev platform.Event) error {
		if ev.ID == evs[2].ID {
			return errors.New("no")
		}
		return nil
	}, dedupehttp.WithLogger(quiet))
	var observed []dedupehttp.Outcome
	r := httptest.NewRequest(http.MethodPost, "/hook", bytes.NewReader(body))
	sign(r, body, eventsSecret)
	r = r.WithContext(dedupehttp.ContextWithObserver(r.Context(), func(o dedupehttp.Outcome) { observed = append(observed, o) }))
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Len(t, observed, 3)
	for i, o := range observed {
		assert.Equal(t, evs[i].Key(p), o.Key)
		assert.Equal(t, dedupehttp.VerdictNew, o.Verdict)
	}
	assert.Equal(t, "processed", observed[0].Result)
	assert.Equal(t, "failed", observed[2].Result)
	assert.ErrorIs(t, observed[2].Err, dedupehttp.ErrHandlerFailed)
	assert.ErrorContains(t, observed[2].Err, "no")
}

// TestEventsConcurrent runs the events of a 40-event batch up to 8 at
// once (dedupe.WithConcurrency), each reading the whole body from r.Body
// as it goes, with one event that panics and one repeated in the batch:
// several run at once, the repeat runs once, the panic fails its event
// alone, and the redelivery runs only it.
func TestEventsConcurrent(t *testing.T) {
	const n = 40
	var body bytes.Buffer
	body.WriteString(`{"destination":"U0","events":[`)
	for i := range n + 1 {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"type":"message","webhookEventId":"01CONC%03d"}`, i%n) // the last repeats the first
	}
	body.WriteString(`]}`)
	p := linePreset()
	log := newEventLog()
	var running, most atomic.Int64
	var panicked atomic.Bool
	d := dedupe.New(nil).With(dedupe.WithConcurrency(8))
	h := dedupehttp.Events(d, p, func(r *http.Request, ev platform.Event) error {
		now := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
		}
		for deadline := time.Now().Add(5 * time.Second); most.Load() < 2 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond) // until a second event runs beside this one
		}
		b, err := io.ReadAll(r.Body)
		assert.NoError(t, err)
		assert.Equal(t, body.Bytes(), b)
		if ev.ID == "01CONC007" && !panicked.Swap(true) {
			panic("one event's bug")
		}
		log.ran(ev.ID, true)
		return nil
	}, dedupehttp.WithLogger(quiet))
	w := deliverBatch(h, body.Bytes(), eventsSecret)
	assert.Equal(t, http.StatusInternalServerError, w.Code)
	assert.Contains(t, w.Body.String(), "1 of 41 events failed")
	assert.GreaterOrEqual(t, most.Load(), int64(2), "events run at once")
	assert.Len(t, log.succeeded, n-1)

	w = deliverBatch(h, body.Bytes(), eventsSecret)
	assert.Equal(t, http.StatusOK, w.Code, w.Body.String())
	require.Len(t, log.succeeded, n)
	for id, runs := range log.succeeded {
		assert.Equal(t, 1, runs, id)
	}
}
