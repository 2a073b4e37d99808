package dedupehttp_test

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
)

// inFlightRun is a Telegram endpoint whose first delivery of update 77 blocks
// in the handler until finish tells it the status to answer.
type inFlightRun struct {
	d       *dedupe.Deduper
	h       http.Handler
	entered chan struct{}
	finish  chan int
	calls   atomic.Int32
}

// newInFlightRun builds an inFlightRun whose copies wait up to budget for the
// first delivery, and whose handler answers later to every call after the
// first.
func newInFlightRun(t *testing.T, budget time.Duration, later int) *inFlightRun {
	p := platform.Telegram
	p.AckBudget = budget
	run := &inFlightRun{d: dedupe.New(nil), entered: make(chan struct{}), finish: make(chan int)}
	run.h = dedupehttp.New(run.d, p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if run.calls.Add(1) == 1 {
			close(run.entered)
			w.WriteHeader(<-run.finish)
			return
		}
		w.WriteHeader(later)
	}), dedupehttp.WithLogger(quiet))
	return run
}

// copyDuring delivers the update, then a copy while the first is processed;
// finishFirst is called once the copy waits. It returns both answers.
func (run *inFlightRun) copyDuring(t *testing.T, finishFirst func()) (first, second *httptest.ResponseRecorder) {
	firstDone := make(chan *httptest.ResponseRecorder)
	go func() { firstDone <- deliver(run.h, update(77), nil) }()
	<-run.entered
	secondDone := make(chan *httptest.ResponseRecorder)
	go func() { secondDone <- deliver(run.h, update(77), nil) }()
	require.Eventually(t, func() bool { return run.d.Stats().Waits == 1 }, 5*time.Second, time.Millisecond,
		"the copy waits for the first")
	finishFirst()
	return <-firstDone, <-secondDone
}

// TestInFlightOwnerFails checks that when the first copy fails, the copy that
// waited for it is not acknowledged blindly: it is processed itself, and
// answered as its handler answers.
func TestInFlightOwnerFails(t *testing.T) {
	t.Run("copy processed", func(t *testing.T) {
		run := newInFlightRun(t, 5*time.Second, http.StatusOK)
		first, second := run.copyDuring(t, func() { run.finish <- http.StatusInternalServerError })
		assert.Equal(t, http.StatusInternalServerError, first.Code)
		assert.Equal(t, http.StatusOK, second.Code)
		assert.EqualValues(t, 2, run.calls.Load(), "the copy ran the handler after the first failed")
		assert.EqualValues(t, 1, run.d.Stats().WaitsClaimed)
	})
	t.Run("copy fails too", func(t *testing.T) {
		run := newInFlightRun(t, 5*time.Second, http.StatusServiceUnavailable)
		first, second := run.copyDuring(t, func() { run.finish <- http.StatusInternalServerError })
		assert.Equal(t, http.StatusInternalServerError, first.Code)
		assert.Equal(t, http.StatusServiceUnavailable, second.Code, "no 2xx for a message nobody processed")
		w := deliver(run.h, update(77), nil)
		assert.Equal(t, http.StatusServiceUnavailable, w.Code, "still unmarked: processed by the next delivery")
		assert.EqualValues(t, 3, run.calls.Load())
	})
}

// TestInFlightOwnerSucceeds checks that a copy that waited for a first copy
// that succeeded is acknowledged as a duplicate.
func TestInFlightOwnerSucceeds(t *testing.T) {
	run := newInFlightRun(t, 5*time.Second, http.StatusTeapot)
	first, second := run.copyDuring(t, func() { run.finish <- http.StatusOK })
	assert.Equal(t, http.StatusOK, first.Code)
	assert.Equal(t, http.StatusOK, second.Code)
	assert.Equal(t, "duplicate", second.Header().Get(dedupehttp.HeaderVerdict))
	assert.EqualValues(t, 1, run.calls.Load())
}

// TestInFlightBudgetRunsOut checks that a copy whose first copy outlasts the
// acknowledgement budget is answered 503 with Retry-After.
func TestInFlightBudgetRunsOut(t *testing.T) {
	run := newInFlightRun(t, 20*time.Millisecond, http.StatusOK)
	firstDone := make(chan int)
	go func() { firstDone <- deliver(run.h, update(77), nil).Code }()
	<-run.entered
	w := deliver(run.h, update(77), nil)
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Equal(t, "in_flight", w.Header().Get(dedupehttp.HeaderVerdict))
	assert.Equal(t, "5", w.Header().Get("Retry-After"))
	assert.EqualValues(t, 1, run.d.Stats().WaitsTimedOut)
	run.finish <- http.StatusOK
	assert.Equal(t, http.StatusOK, <-firstDone)
}

// TestPresetAckBudgets pins each preset's budget below the deadline its
// documentation cites, with room to answer.
func TestPresetAckBudgets(t *testing.T) {
	deadline := map[string]time.Duration{
		"telegram":        60 * time.Second, // telegram-bot-api: webhook connection idle timeout
		"slack":           3 * time.Second,
		"feishu":          3 * time.Second,
		"discord":         3 * time.Second,
		"onebot":          5 * time.Second, // go-cqhttp: POST timeout, at least 5 s
		"qq":              3 * time.Second,
		"line":            2 * time.Second,         // LINE: request_timeout when no answer within 2 s
		"meta":            5 * time.Second,         // WhatsApp: 200 within 5 s (360dialog partner docs)
		"matrix":          60 * time.Second,        // Synapse: SimpleHttpClient gives up after 60 s
		"wechat":          5 * time.Second,         // WeChat: no answer within 5 s and it hangs up
		"wecom":           5 * time.Second,         // WeCom: the same five seconds
		"dingtalk":        1500 * time.Millisecond, // DingTalk names no robot deadline; its callbacks' 1500 ms
		"dingtalk-events": 1500 * time.Millisecond, // DingTalk: answer within 1500 ms
		"webhooks":        15 * time.Second,        // Standard Webhooks: recommended request timeout 15 to 30 s
		"github":          10 * time.Second,        // GitHub: a delivery is failed after 10 s without an answer
		"stripe":          3 * time.Second,         // Stripe: no published deadline; the shortest reported, 3 s
	}
	for _, p := range platform.Presets() {
		require.Contains(t, deadline, p.Name)
		assert.Positive(t, p.AckBudget, p.Name)
		assert.LessOrEqual(t, p.AckBudget, deadline[p.Name]-time.Second, "%s leaves a second to answer", p.Name)
	}
}
