package dedupehttp_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
	"github.com/gatewaykit/dedupe/queue"
)

// eventQueues returns the real queues the batch tests of NewAsyncEvents
// run on.
func eventQueues() map[string]func(t *testing.T) queue.Queue {
	return map[string]func(t *testing.T) queue.Queue{
		"memory": func(*testing.T) queue.Queue { return queue.NewMemory(queue.MemoryConfig{}) },
		"sqlite": func(t *testing.T) queue.Queue {
			q, err := queue.OpenSQLite(filepath.Join(t.TempDir(), "queue.db"), queue.SQLiteConfig{})
			require.NoError(t, err)
			return q
		},
	}
}

// batchCase is a batched platform's preset, signer and payloads.
type batchCase struct {
	preset      platform.Preset
	signer      *platformtest.Signer
	first, redo []byte
}

func batchCases(t *testing.T) map[string]batchCase {
	line := platformtest.NewSigner("line", eventsSecret)
	meta := platformtest.NewSigner("meta", eventsSecret)
	matrix := platformtest.NewSigner("matrix", eventsSecret)
	return map[string]batchCase{
		"line": {line.Preset(platform.LINE), line, testdata(t, "line_events.json"), testdata(t, "line_events_redelivery.json")},
		"whatsapp": {meta.Preset(platform.Meta), meta, testdata(t, "meta_whatsapp.json"),
			testdata(t, "meta_whatsapp.json")},
		"messenger": {meta.Preset(platform.Meta), meta, testdata(t, "meta_messenger.json"),
			testdata(t, "meta_messenger.json")},
		"matrix": {matrix.Preset(platform.Matrix), matrix, testdata(t, "matrix_txn.json"), testdata(t, "matrix_txn.json")},
	}
}

// post posts body to h with the headers s signs it with.
func (b batchCase) post(h http.Handler, s *platformtest.Signer, body []byte) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPut, "/_matrix/app/v1/transactions/txn1", bytes.NewReader(body))
	for k, v := range s.Sign(body, platformNow) {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestAsyncEventsBatches accepts LINE, WhatsApp, Messenger and Matrix
// batches with NewAsyncEvents, on the memory and SQLite queues: forged
// batches get 401 with no store call and no push; the real batch is
// answered 200 {} once each event is in the queue, one message per event;
// its redeliveries push nothing new, before and after the events ran; each
// event runs once, the one whose handler failed once runs twice.
func TestAsyncEventsBatches(t *testing.T) {
	for qName, open := range eventQueues() {
		for name, b := range batchCases(t) {
			t.Run(qName+"/"+name, func(t *testing.T) {
				evs, err := b.preset.Events(b.first, nil)
				require.NoError(t, err)
				require.NotEmpty(t, evs)
				failing := evs[0].ID
				store := &countingStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
				q := &countingQueue{Queue: open(t)}
				t.Cleanup(func() { _ = q.Close() })
				log := newEventLog()
				var once sync.Once
				done := make(chan ended, 2*len(evs))
				a := dedupehttp.NewAsyncEvents(dedupe.New(store), b.preset, func(r *http.Request, ev platform.Event) error {
					key, verdict := dedupehttp.KeyFrom(r.Context())
					assert.Equal(t, ev.Key(b.preset), key)
					assert.Equal(t, dedupehttp.VerdictNew, verdict)
					body, _ := io.ReadAll(r.Body)
					part, err := b.preset.Events(body, r.Header)
					assert.NoError(t, err)
					if assert.Len(t, part, 1, "the handler reads its event's part of the batch") {
						assert.Equal(t, ev, part[0])
					}
					fail := false
					if ev.ID == failing {
						once.Do(func() { fail = true })
					}
					log.ran(ev.ID, !fail)
					if fail {
						return errors.New("downstream refused")
					}
					return nil
				}, q, dedupehttp.WithLogger(quiet), dedupehttp.WithDone(doneTo(done)),
					dedupehttp.WithClock(func() time.Time { return platformNow }))
				t.Cleanup(func() { _ = a.Close(t.Context()) })

				for i, forger := range []*platformtest.Signer{
					platformtest.NewSigner(name2signer(name), "wrong secret"),
					platformtest.NewSigner("telegram", "none of this platform's headers"),
				} {
					w := b.post(a, forger, b.first)
					assert.Equal(t, http.StatusUnauthorized, w.Code, "forgery %d", i)
				}
				if name != "matrix" { // a Matrix hs_token does not sign the body
					tampered := httptest.NewRequest(http.MethodPut, "/t", bytes.NewReader(append(bytes.Clone(b.first), ' ')))
					for k, v := range b.signer.Sign(b.first, platformNow) {
						tampered.Header[k] = v
					}
					w := httptest.NewRecorder()
					a.ServeHTTP(w, tampered)
					assert.Equal(t, http.StatusUnauthorized, w.Code, "tampered batch")
				}
				assert.Zero(t, store.calls.Load(), "store calls for forged batches")
				assert.Zero(t, q.pushes.Load(), "pushes of forged batches")

				w := b.post(a, b.signer, b.first)
				require.Equal(t, http.StatusOK, w.Code, w.Body.String())
				assert.Equal(t, "{}", w.Body.String())
				assert.Equal(t, "queued", w.Header().Get(dedupehttp.HeaderVerdict))
				assert.EqualValues(t, len(evs), q.added.Load(), "one message per event")
				// At once, with the events live in the queue: nothing is pushed
				// again, but an event that ended between its lookup and its push
				// (a narrow window) is pushed and then settled as a duplicate.
				w = b.post(a, b.signer, b.redo)
				require.Equal(t, http.StatusOK, w.Code, w.Body.String())
				drain(t, done, int(q.added.Load()))
				pushes := q.pushes.Load()
				w = b.post(a, b.signer, b.redo) // after: the events are marked
				require.Equal(t, http.StatusOK, w.Code, w.Body.String())
				assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
				assert.Equal(t, pushes, q.pushes.Load(), "a batch processed already pushes nothing")

				require.NoError(t, a.Close(t.Context()))
				log.mu.Lock()
				defer log.mu.Unlock()
				require.Len(t, log.succeeded, len(evs))
				for _, ev := range evs {
					assert.Equal(t, 1, log.succeeded[ev.ID], "successful runs of %s", ev.ID)
					want := 1
					if ev.ID == failing {
						want = 2
					}
					assert.Equal(t, want, log.attempts[ev.ID], "runs of %s", ev.ID)
				}
			})
		}
	}
}

// name2signer is the platformtest name of a batch case.
func name2signer(name string) string {
	if name == "whatsapp" || name == "messenger" {
		return "meta"
	}
	return name
}

// drain waits for n events reported done: processed, or found processed
// already.
func drain(t *testing.T, done <-chan ended, n int) {
	t.Helper()
	for range n {
		select {
		case e := <-done:
			if !errors.Is(e.err, dedupe.ErrDuplicate) {
				require.NoError(t, e.err, "event %s", e.key)
			}
		case <-time.After(time.Minute):
			t.Fatalf("events not processed within a minute")
		}
	}
}

// TestAsyncEventsUnavailable answers a batch 503 with Retry-After when the
// queue fails or is full, after pushing what it could: the redelivery,
// once there is room, pushes the rest and nothing twice.
func TestAsyncEventsUnavailable(t *testing.T) {
	b := batchCases(t)["line"]
	evs, err := b.preset.Events(b.first, nil)
	require.NoError(t, err)

	broken := dedupehttp.NewAsyncEvents(dedupe.New(nil), b.preset, func(*http.Request, platform.Event) error { return nil },
		failingQueue{queue.NewMemory(queue.MemoryConfig{})}, dedupehttp.WithLogger(quiet))
	w := b.post(broken, b.signer, b.first)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.NotEmpty(t, w.Header().Get("Retry-After"))
	require.NoError(t, broken.Close(t.Context()))

	mem := queue.NewMemory(queue.MemoryConfig{MaxDepth: 1})
	t.Cleanup(func() { _ = mem.Close() })
	q := &countingQueue{Queue: mem}
	gate := make(chan struct{})
	done := make(chan ended, len(evs))
	a := dedupehttp.NewAsyncEvents(dedupe.New(nil), b.preset, func(*http.Request, platform.Event) error {
		<-gate
		return nil
	}, q, dedupehttp.WithLogger(quiet), dedupehttp.WithDone(doneTo(done)), dedupehttp.WithWorkers(1))
	w = b.post(a, b.signer, b.first)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code, "the second event finds the queue full")
	assert.Equal(t, "unavailable", w.Header().Get(dedupehttp.HeaderVerdict))
	assert.EqualValues(t, 1, q.added.Load())
	close(gate)
	for range len(evs) { // each redelivery pushes the next event, once the one before ran
		drain(t, done, 1)
		b.post(a, b.signer, b.first)
	}
	w = b.post(a, b.signer, b.first)
	assert.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "duplicate", w.Header().Get(dedupehttp.HeaderVerdict))
	assert.EqualValues(t, len(evs), q.added.Load(), "each event pushed once")
	require.NoError(t, a.Close(t.Context()))
}

// TestAsyncEventsInvalidIDAlone queues the two valid events of a LINE batch
// whose two others have ids that cannot be keys, refused alone, and answers
// 200: the valid events run once, and a redelivery pushes nothing again.
func TestAsyncEventsInvalidIDAlone(t *testing.T) {
	body := []byte(`{"destination":"U0","events":[` +
		`{"type":"message","webhookEventId":"01GOOD1"},` +
		`{"type":"message","webhookEventId":"01BAD` + "\xff" + `"},` +
		`{"type":"message","webhookEventId":"01GOOD2"},` +
		`{"type":"message","webhookEventId":""}]}`)
	p := linePreset()
	p.Events = func(body []byte, h http.Header) ([]platform.Event, error) {
		evs, err := jsonLineEvents(bytes.ReplaceAll(body, []byte("\xff"), []byte("@")))
		for i := range evs {
			evs[i].ID = strings.ReplaceAll(evs[i].ID, "@", "\xff")
		}
		return evs, err
	}
	mem := queue.NewMemory(queue.MemoryConfig{})
	t.Cleanup(func() { _ = mem.Close() })
	q := &countingQueue{Queue: mem}
	log := newEventLog()
	done := make(chan ended, 4)
	a := dedupehttp.NewAsyncEvents(dedupe.New(nil), p, func(_ *http.Request, ev platform.Event) error {
		log.ran(ev.ID, true)
		return nil
	}, q, dedupehttp.WithLogger(quiet), dedupehttp.WithDone(doneTo(done)))
	for round := range 2 {
		w := deliverBatch(a, body, eventsSecret)
		assert.Equal(t, http.StatusOK, w.Code)
		assert.Equal(t, "{}", w.Body.String())
		if round == 0 {
			drain(t, done, 2)
		}
	}
	require.NoError(t, a.Close(t.Context()))
	assert.EqualValues(t, 2, q.added.Load())
	assert.Equal(t, map[string]int{"01GOOD1": 1, "01GOOD2": 1}, log.succeeded)
	assert.Equal(t, uint64(4), a.Stats().Malformed)
}
