package dedupeprom_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupeprom"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestQueueCollector(t *testing.T) {
	quiet := dedupehttp.WithLogger(slog.New(slog.DiscardHandler))
	tg := platform.Telegram.WithSecret("s")
	done := make(chan error, 8)
	onDone := dedupehttp.WithDone(func(_ context.Context, _ dedupe.Key, err error) { done <- err })
	fail := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(string(mustBody(t, r)), `"update_id":2`) {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	gate := make(chan struct{})
	blocked := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-gate })
	q := queue.NewMemory(queue.MemoryConfig{})
	defer q.Close()
	mem := dedupehttp.NewAsync(dedupe.New(nil), dedupehttp.FromPreset(tg), fail, dedupehttp.WithVerify(tg), onDone, quiet)
	durable := dedupehttp.NewAsync(dedupe.New(nil), dedupehttp.FromPreset(tg), blocked, dedupehttp.WithVerify(tg),
		dedupehttp.WithQueue(q), dedupehttp.WithWorkers(1), onDone, quiet)
	send := func(a http.Handler, body string) {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s")
		w := httptest.NewRecorder()
		a.ServeHTTP(w, r)
		require.Equal(t, http.StatusAccepted, w.Code)
	}
	send(mem, `{"update_id":1}`)
	send(mem, `{"update_id":2}`) // fails
	<-done
	<-done
	send(durable, `{"update_id":3}`) // blocks its only worker
	send(durable, `{"update_id":4}`) // waits in the queue

	c := dedupeprom.NewQueueCollector([]*dedupehttp.Async{mem, durable}, dedupeprom.WithNamespace("gw"))
	want := `
# HELP gw_dedupe_queue_depth Messages accepted with 202 and not yet settled: queued or being processed.
# TYPE gw_dedupe_queue_depth gauge
gw_dedupe_queue_depth{platform="telegram"} 2
# HELP gw_dedupe_queue_processed_total Accepted messages by outcome: success (handled and marked), retried (put back in the queue to be taken again), failed (the handler failed for good) and duplicate (settled without the handler: processed already).
# TYPE gw_dedupe_queue_processed_total counter
gw_dedupe_queue_processed_total{outcome="duplicate",platform="telegram"} 0
gw_dedupe_queue_processed_total{outcome="failed",platform="telegram"} 1
gw_dedupe_queue_processed_total{outcome="retried",platform="telegram"} 0
gw_dedupe_queue_processed_total{outcome="success",platform="telegram"} 1
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want),
		"gw_dedupe_queue_depth", "gw_dedupe_queue_processed_total"))
	dead := `
# HELP gw_dedupe_queue_failed Failed messages kept by the durable queue (dead letters), which can be requeued by id.
# TYPE gw_dedupe_queue_failed gauge
gw_dedupe_queue_failed{platform="telegram"} 0
# HELP gw_dedupe_queue_full_total Requests refused with 503 and Retry-After because the queue was full.
# TYPE gw_dedupe_queue_full_total counter
gw_dedupe_queue_full_total{platform="telegram"} 0
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(dead),
		"gw_dedupe_queue_failed", "gw_dedupe_queue_full_total"))
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	families, err := reg.Gather()
	require.NoError(t, err)
	var runs uint64
	for _, f := range families {
		if f.GetName() == "gw_dedupe_queue_processing_duration_seconds" {
			runs = f.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	require.EqualValues(t, 2, runs, "two handler runs ended")

	close(gate)
	<-done
	<-done
	require.NoError(t, durable.Close(t.Context()))
	require.NoError(t, mem.Close(t.Context()))
	require.Equal(t, 2, testutil.CollectAndCount(c, "gw_dedupe_queue_depth", "gw_dedupe_queue_processing_duration_seconds"))
	require.EqualValues(t, 0, testutil.ToFloat64(onlyDepth{c}))
}

// onlyDepth collects the depth metric of a QueueCollector alone.
type onlyDepth struct{ c *dedupeprom.QueueCollector }

func (o onlyDepth) Describe(ch chan<- *prometheus.Desc) { o.c.Describe(ch) }

func (o onlyDepth) Collect(ch chan<- prometheus.Metric) {
	all := make(chan prometheus.Metric, 16)
	o.c.Collect(all)
	close(all)
	for m := range all {
		if strings.Contains(m.Desc().String(), "queue_depth") {
			ch <- m
		}
	}
}

func mustBody(t *testing.T, r *http.Request) []byte {
	b, err := dedupehttp.Body(r)
	require.NoError(t, err)
	return b
}
