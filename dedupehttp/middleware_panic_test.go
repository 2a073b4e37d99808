package dedupehttp_test

import (
	"io"
	"net/http"
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

// TestSuccessThenPanicMarks sends 200 concurrent copies of one update to a
// handler that answers 200, flushes it and then panics, over a real server.
// The platform got 200, so the message must be marked: the handler runs
// once and every copy is answered 200 (before this was fixed the claim was
// released and the message left unmarked: here 200 of 200 copies ran the
// handler; 162 in the run).
func TestSuccessThenPanicMarks(t *testing.T) {
	const copies = 200
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	d := dedupe.New(store)
	var runs atomic.Int64
	var logs logBuffer
	h := dedupehttp.New(d, platform.Telegram, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusOK)
		_ = http.NewResponseController(w).Flush()
		// Hold the claim until every other copy waits for it.
		for deadline := time.Now().Add(10 * time.Second); d.Stats().Waits < copies-1 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		panic("after the answer")
	}), dedupehttp.WithLogger(logs.logger()))
	srv := serve(t, h)

	var wg sync.WaitGroup
	var ok atomic.Int64
	for range copies {
		wg.Go(func() {
			if r := post(srv, update(1)); r.err == nil && r.status == http.StatusOK {
				ok.Add(1)
			}
		})
	}
	wg.Wait()

	assert.EqualValues(t, copies-1, d.Stats().Waits, "copies that waited for the first")
	assert.EqualValues(t, 1, runs.Load(), "handler runs")
	assert.EqualValues(t, copies, ok.Load(), "copies answered 200")
	marked, err := store.Exists(t.Context(), dedupe.Key{Channel: "telegram", MessageID: "1"})
	require.NoError(t, err)
	assert.True(t, marked, "the message is marked")
	assert.EqualValues(t, 1, h.Stats().PanicsAfterSuccess)
	var logged int
	for _, rec := range logs.records(t) {
		if rec["level"] == "ERROR" && rec["panic"] == "after the answer" {
			logged++
			assert.Contains(t, rec["stack"], "TestSuccessThenPanicMarks")
			assert.Equal(t, "telegram:1", rec["key"])
		}
	}
	assert.Equal(t, 1, logged, "the panic is logged once, with its stack")
}

// TestPanicAfterStatus checks, for each way a handler can panic, whether the
// message is marked (a success status went out before the panic) or
// released (it did not), and what the platform sees.
func TestPanicAfterStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler func(w http.ResponseWriter)
		marked  bool
		status  int // 0: the connection is aborted
	}{
		{"WriteHeader 200, not flushed", func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK); panic("x") }, true, http.StatusOK},
		{"Write", func(w http.ResponseWriter) { _, _ = io.WriteString(w, "ok"); panic("x") }, true, http.StatusOK},
		{"204", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent); panic("x") }, true, http.StatusNoContent},
		{"200 then abort", func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK); panic(http.ErrAbortHandler) }, true, 0},
		{"before any status", func(http.ResponseWriter) { panic("x") }, false, 0},
		{"after a 500", func(w http.ResponseWriter) { w.WriteHeader(http.StatusInternalServerError); panic("x") }, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
			h := dedupehttp.New(dedupe.New(store), platform.Telegram, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.handler(w)
			}), dedupehttp.WithLogger(quiet))
			srv := serve(t, h)
			r := post(srv, update(3))
			if tc.status == 0 {
				assert.Error(t, r.err, "the connection is aborted")
			} else {
				require.NoError(t, r.err)
				assert.Equal(t, tc.status, r.status)
			}
			marked, err := store.Exists(t.Context(), dedupe.Key{Channel: "telegram", MessageID: "3"})
			require.NoError(t, err)
			assert.Equal(t, tc.marked, marked)
			var counted uint64
			if tc.marked {
				counted = 1
			}
			assert.Equal(t, counted, h.Stats().PanicsAfterSuccess)
		})
	}
}
