package dedupeprom_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupeprom"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
)

// exportedFamilies are the metric families the three collectors export
// between them, by type.
var exportedFamilies = map[string]dto.MetricType{
	"dedupe_decisions_total":                   dto.MetricType_COUNTER,
	"dedupe_waits_total":                       dto.MetricType_COUNTER,
	"dedupe_store_faults_total":                dto.MetricType_COUNTER,
	"dedupe_store_duration_seconds":            dto.MetricType_HISTOGRAM,
	"dedupe_evicted_marks_total":               dto.MetricType_COUNTER,
	"dedupe_http_deliveries_total":             dto.MetricType_COUNTER,
	"dedupe_queue_depth":                       dto.MetricType_GAUGE,
	"dedupe_queue_failed":                      dto.MetricType_GAUGE,
	"dedupe_queue_full_total":                  dto.MetricType_COUNTER,
	"dedupe_queue_processed_total":             dto.MetricType_COUNTER,
	"dedupe_queue_processing_duration_seconds": dto.MetricType_HISTOGRAM,
}

// gatherExported exercises a real Deduper on a memory store, a webhook
// endpoint and an asynchronous endpoint, registers the three collectors over
// them in a pedantic registry and returns what it gathers. It checks that
// every family of exportedFamilies is there, with its type, and no other.
func gatherExported(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), dedupe.WithWait(0))
	t.Cleanup(func() { _ = d.Close() })
	ctx := t.Context()
	require.NoError(t, d.Do(ctx, key("1"), ok))
	require.ErrorIs(t, d.Do(ctx, key("1"), ok), dedupe.ErrDuplicate)
	boom := errors.New("boom")
	require.ErrorIs(t, d.Do(ctx, key("2"), func(context.Context) error { return boom }), boom)

	quiet := dedupehttp.WithLogger(slog.New(slog.DiscardHandler))
	tg := platform.Telegram.WithSecret("s")
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	edge := dedupehttp.New(d, tg, next, quiet)
	done := make(chan error, 1)
	async := dedupehttp.NewAsync(d, dedupehttp.FromPreset(tg), next, dedupehttp.WithVerify(tg), quiet,
		dedupehttp.WithQueue(queue.NewMemory(queue.MemoryConfig{})), // a queue that keeps dead letters
		dedupehttp.WithDone(func(_ context.Context, _ dedupe.Key, err error) { done <- err }))
	t.Cleanup(func() { require.NoError(t, async.Close(context.Background())) })

	deliver := func(h http.Handler, body string) int {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("X-Telegram-Bot-Api-Secret-Token", "s")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	require.Equal(t, http.StatusOK, deliver(edge, `{"update_id":10}`))
	require.Equal(t, http.StatusAccepted, deliver(async, `{"update_id":11}`))
	require.NoError(t, <-done)

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(
		dedupeprom.NewCollector(d),
		dedupeprom.NewHTTPCollector([]*dedupehttp.Handler{edge}),
		dedupeprom.NewQueueCollector([]*dedupehttp.Async{async}),
	)
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]dto.MetricType{}
	for _, f := range families {
		got[f.GetName()] = f.GetType()
	}
	require.Equal(t, exportedFamilies, got, "the families the collectors export")
	return families
}
