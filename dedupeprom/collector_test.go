package dedupeprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupeprom"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failingStore is a store whose Claim fails as a store in an outage does.
type failingStore struct{ dedupe.Store }

var errOutage = errors.New("connection refused")

func (failingStore) Claim(context.Context, dedupe.Claim, time.Duration) (dedupe.Status, error) {
	return 0, errOutage
}

func key(id string) dedupe.Key { return dedupe.Key{Channel: "test", MessageID: id} }

func ok(context.Context) error { return nil }

// drive makes d give every verdict: processed 2, duplicate 1, in_flight 1,
// released 1, store_error 1, lease_lost 1 and payload_mismatch 1.
func drive(t *testing.T, d *dedupe.Deduper, store dedupe.Store) {
	ctx := t.Context()
	require.NoError(t, d.Do(ctx, key("1"), ok))
	require.ErrorIs(t, d.Do(ctx, key("1"), ok), dedupe.ErrDuplicate)
	require.NoError(t, d.With(dedupe.WithPayload([]byte("a"))).Do(ctx, key("6"), ok))
	require.ErrorIs(t, d.With(dedupe.WithPayload([]byte("b"))).Do(ctx, key("6"), ok), dedupe.ErrPayloadMismatch)

	held := make(chan struct{})
	release := make(chan struct{})
	done := make(chan error)
	go func() {
		done <- d.Do(ctx, key("2"), func(context.Context) error {
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	require.ErrorIs(t, d.Do(ctx, key("2"), ok), dedupe.ErrInFlight)
	close(release)
	require.NoError(t, <-done)

	boom := errors.New("boom")
	require.ErrorIs(t, d.Do(ctx, key("3"), func(context.Context) error { return boom }), boom)

	// The key is marked behind the claim's back: the next renewal finds the
	// claim lost.
	require.NoError(t, d.Do(ctx, key("4"), func(ctx context.Context) error {
		if err := store.Mark(ctx, key("4"), 0); err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // in a synctest bubble: the fake clock
		return nil
	}))
}

func TestCollectorCounters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(store, dedupe.WithLease(3*time.Second), dedupe.WithRenewal(time.Second))
		drive(t, d, store)
		require.NoError(t, store.Close())
		require.ErrorIs(t, d.Do(t.Context(), key("5"), ok), dedupe.ErrClosed)

		c := dedupeprom.NewCollector(d)
		want := `
# HELP dedupe_decisions_total Verdicts of the deduplicator on incoming messages.
# TYPE dedupe_decisions_total counter
dedupe_decisions_total{backend="memory",verdict="duplicate"} 1
dedupe_decisions_total{backend="memory",verdict="fallback"} 0
dedupe_decisions_total{backend="memory",verdict="in_flight"} 1
dedupe_decisions_total{backend="memory",verdict="lease_lost"} 1
dedupe_decisions_total{backend="memory",verdict="payload_mismatch"} 1
dedupe_decisions_total{backend="memory",verdict="processed"} 4
dedupe_decisions_total{backend="memory",verdict="released"} 1
dedupe_decisions_total{backend="memory",verdict="store_error"} 1
`
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), "dedupe_decisions_total"))
	})
}

func TestCollectorFallback(t *testing.T) {
	primary := failingStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	d := dedupe.New(primary, dedupe.WithFallback(dedupe.NewMemoryStore(dedupe.MemoryConfig{})))
	require.NoError(t, d.Do(t.Context(), key("1"), ok))

	c := dedupeprom.NewCollector(d)
	assert.Equal(t, 1.0, decision(t, c, "fallback"))
	assert.Equal(t, 1.0, decision(t, c, "store_error"))
	assert.Equal(t, 1.0, decision(t, c, "processed"))
}

// decision returns the value of dedupe_decisions_total for verdict.
func decision(t *testing.T, c prometheus.Collector, verdict string) float64 {
	t.Helper()
	return counter(t, c, "dedupe_decisions_total", "verdict", verdict)
}

// counter returns the value of the counter name whose label is value.
func counter(t *testing.T, c prometheus.Collector, name, labelName, value string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, labelName) == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	require.Failf(t, "no such counter", "no %s{%s=%q}", name, labelName, value)
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestCollectorHistogram(t *testing.T) {
	d := dedupe.New(nil)
	const n = 5
	for i := range n {
		require.NoError(t, d.Do(t.Context(), key(fmt.Sprint(i+1)), ok))
	}
	require.ErrorIs(t, d.Do(t.Context(), key("1"), ok), dedupe.ErrDuplicate)

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(dedupeprom.NewCollector(d))
	mfs, err := reg.Gather()
	require.NoError(t, err)

	var hist *dto.MetricFamily
	for _, mf := range mfs {
		if mf.GetName() == "dedupe_store_duration_seconds" {
			hist = mf
		}
	}
	require.NotNil(t, hist)
	assert.Equal(t, dto.MetricType_HISTOGRAM, hist.GetType())

	counts := map[string]uint64{}
	for _, m := range hist.GetMetric() {
		assert.Equal(t, "memory", label(m, "backend"))
		h := m.GetHistogram()
		counts[label(m, "phase")] = h.GetSampleCount()

		stats := d.Stats().Latency[label(m, "phase")]
		assert.InDelta(t, stats.Sum.Seconds(), h.GetSampleSum(), 1e-9)
		require.Len(t, h.GetBucket(), len(dedupe.LatencyStats{}.Bounds()))
		var prev uint64
		for i, b := range h.GetBucket() {
			assert.Equal(t, dedupe.LatencyStats{}.Bounds()[i].Seconds(), b.GetUpperBound())
			assert.Equal(t, stats.Buckets[i], b.GetCumulativeCount())
			assert.GreaterOrEqual(t, b.GetCumulativeCount(), prev, "cumulative")
			assert.LessOrEqual(t, b.GetCumulativeCount(), h.GetSampleCount())
			prev = b.GetCumulativeCount()
		}
	}
	assert.Equal(t, map[string]uint64{"claim": n + 1, "mark": n, "release": 0, "extend": 0}, counts)
}

func TestCollectorNamespaceAndLabels(t *testing.T) {
	slack := dedupe.New(nil)
	telegram := dedupe.New(nil)
	require.NoError(t, slack.Do(t.Context(), key("1"), ok))

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(
		dedupeprom.NewCollector(slack, dedupeprom.WithNamespace("gw"),
			dedupeprom.WithConstLabels(prometheus.Labels{"deduper": "slack"})),
		dedupeprom.NewCollector(telegram, dedupeprom.WithNamespace("gw"),
			dedupeprom.WithConstLabels(prometheus.Labels{"deduper": "telegram"})),
	)
	want := `
# HELP gw_dedupe_decisions_total Verdicts of the deduplicator on incoming messages.
# TYPE gw_dedupe_decisions_total counter
gw_dedupe_decisions_total{backend="memory",deduper="slack",verdict="duplicate"} 0
gw_dedupe_decisions_total{backend="memory",deduper="slack",verdict="fallback"} 0
gw_dedupe_decisions_total{backend="memory",deduper="slack",verdict="in_flight"} 0
gw_dedupe_decisions_total{backend="memory",deduper="slack",verdict="lease_lost"} 0
gw_dedupe_decisions_total{backend="memory",deduper="slack",verdict="payload_mismatch"} 0
gw_dedupe_decisions_total{backend="memory",deduper="slack",verdict="processed"} 1
gw_dedupe_decisions_total{backend="memory",deduper="slack",verdict="released"} 0
gw_dedupe_decisions_total{backend="memory",deduper="slack",verdict="store_error"} 0
gw_dedupe_decisions_total{backend="memory",deduper="telegram",verdict="duplicate"} 0
gw_dedupe_decisions_total{backend="memory",deduper="telegram",verdict="fallback"} 0
gw_dedupe_decisions_total{backend="memory",deduper="telegram",verdict="in_flight"} 0
gw_dedupe_decisions_total{backend="memory",deduper="telegram",verdict="lease_lost"} 0
gw_dedupe_decisions_total{backend="memory",deduper="telegram",verdict="payload_mismatch"} 0
gw_dedupe_decisions_total{backend="memory",deduper="telegram",verdict="processed"} 0
gw_dedupe_decisions_total{backend="memory",deduper="telegram",verdict="released"} 0
gw_dedupe_decisions_total{backend="memory",deduper="telegram",verdict="store_error"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want), "gw_dedupe_decisions_total"))
	assert.Equal(t, 8, testutil.CollectAndCount(dedupeprom.NewCollector(slack), "dedupe_store_duration_seconds")+
		testutil.CollectAndCount(dedupeprom.NewCollector(telegram), "dedupe_store_duration_seconds"))

	// A second collector with the same names and labels is refused.
	err := reg.Register(dedupeprom.NewCollector(slack, dedupeprom.WithNamespace("gw"),
		dedupeprom.WithConstLabels(prometheus.Labels{"deduper": "slack"})))
	var already prometheus.AlreadyRegisteredError
	assert.ErrorAs(t, err, &already)
}

// lostReplyStore takes each claim and then reports an error: the reply was
// lost after the write.
type lostReplyStore struct {
	dedupe.Store
	lose atomic.Bool
}

func (s *lostReplyStore) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	st, err := s.Store.Claim(ctx, c, lease)
	if err == nil && s.lose.Swap(false) {
		return 0, errOutage
	}
	return st, err
}

func TestCollectorWaitsAndFaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &lostReplyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
		d := dedupe.New(store, dedupe.WithWait(time.Minute))
		defer d.Close()
		store.lose.Store(true)
		require.NoError(t, d.Do(t.Context(), key("1"), ok), "asked again with its token")

		held, done := make(chan struct{}), make(chan error)
		go func() {
			done <- d.Do(t.Context(), key("2"), func(context.Context) error {
				close(held)
				time.Sleep(time.Second)
				return nil
			})
		}()
		<-held
		require.ErrorIs(t, d.Do(t.Context(), key("2"), ok), dedupe.ErrDuplicate, "waited for the owner")
		require.NoError(t, <-done)

		c := dedupeprom.NewCollector(d)
		want := `
# HELP dedupe_waits_total Outcomes of waits for the owner of a message in flight: duplicate (the owner processed it), claimed (the owner failed or died) or timed_out.
# TYPE dedupe_waits_total counter
dedupe_waits_total{backend="memory",outcome="claimed"} 0
dedupe_waits_total{backend="memory",outcome="duplicate"} 1
dedupe_waits_total{backend="memory",outcome="timed_out"} 0
`
		require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), "dedupe_waits_total"))
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(c)
		n, err := testutil.GatherAndCount(reg, "dedupe_store_faults_total")
		require.NoError(t, err)
		assert.Equal(t, 4, n)
		assert.Equal(t, 1.0, counter(t, c, "dedupe_store_faults_total", "event", "ambiguous_claim"))
	})
}
