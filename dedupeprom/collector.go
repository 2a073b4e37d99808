package dedupeprom

import (
	"github.com/gatewaykit/dedupe"
	"github.com/prometheus/client_golang/prometheus"
)

// Collector is a [prometheus.Collector] that exports a [dedupe.Deduper]'s
// [dedupe.Stats] at scrape time. Create one with [NewCollector]. A Collector is
// safe for concurrent use.
type Collector struct {
	d         *dedupe.Deduper
	decisions *prometheus.Desc
	waits     *prometheus.Desc
	faults    *prometheus.Desc
	store     *prometheus.Desc
	evicted   *prometheus.Desc
	buckets   []float64 // dedupe.LatencyStats.Bounds in seconds
}

// An Option configures a [Collector].
type Option func(*config)

type config struct {
	namespace string
	labels    prometheus.Labels
}

// WithNamespace prefixes the metric names with namespace and an underscore:
// WithNamespace("gateway") exports gateway_dedupe_decisions_total. The default
// is no prefix.
func WithNamespace(namespace string) Option {
	return func(c *config) { c.namespace = namespace }
}

// WithConstLabels adds labels with fixed values to every metric the
// [Collector] exports. Use it to register the collectors of several Dedupers
// in one registry, for example prometheus.Labels{"deduper": "slack"}: two
// collectors with the same names and labels are refused by the registry.
// The labels must not be named "backend", "verdict" or "phase".
func WithConstLabels(labels prometheus.Labels) Option {
	return func(c *config) {
		c.labels = make(prometheus.Labels, len(labels))
		for k, v := range labels {
			c.labels[k] = v
		}
	}
}

// NewCollector returns a [Collector] exporting d's counters. Register it with
// a [prometheus.Registerer]; invalid names or labels given by the options are
// reported then, by Register.
func NewCollector(d *dedupe.Deduper, opts ...Option) *Collector {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	c := &Collector{
		d: d,
		decisions: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "decisions_total"),
			"Verdicts of the deduplicator on incoming messages.",
			[]string{"backend", "verdict"}, cfg.labels),
		waits: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "waits_total"),
			"Outcomes of waits for the owner of a message in flight: duplicate (the owner processed it), claimed (the owner failed or died) or timed_out.",
			[]string{"backend", "outcome"}, cfg.labels),
		faults: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "store_faults_total"),
			"How the deduplicator met store faults: ambiguous_claim (a failed claim asked again or released by its token), mark_deferred (a mark queued for the primary store), mark_replayed (a queued mark written later) and dropped (queued work dropped).",
			[]string{"backend", "event"}, cfg.labels),
		store: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "store_duration_seconds"),
			"Duration of the deduplicator's store calls, by phase.",
			[]string{"backend", "phase"}, cfg.labels),
		evicted: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "evicted_marks_total"),
			"Marks the store evicted before their TTL ran out, to take new ones: each key was new again before its window ended. A bounded store (memory) that is too small for one TTL of messages, or a flood of distinct ids, evicts them.",
			[]string{"backend"}, cfg.labels),
		buckets: make([]float64, len(dedupe.LatencyStats{}.Bounds())),
	}
	for i, b := range (dedupe.LatencyStats{}).Bounds() {
		c.buckets[i] = b.Seconds()
	}
	return c
}

// Describe sends the descriptors of the metrics the [Collector] exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.decisions
	ch <- c.waits
	ch <- c.faults
	ch <- c.store
	ch <- c.evicted
}

type labelled struct {
	label string
	n     uint64
}

func (c *Collector) counters(ch chan<- prometheus.Metric, desc *prometheus.Desc, backend string, vs ...labelled) {
	for _, v := range vs {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v.n), backend, v.label)
	}
}

// Collect sends the current values of the Deduper's counters.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Stats()
	c.counters(ch, c.decisions, s.Backend,
		labelled{"processed", s.Processed},
		labelled{"duplicate", s.Duplicates},
		labelled{"in_flight", s.InFlight},
		labelled{"released", s.Failed},
		labelled{"store_error", s.StoreErrors},
		labelled{"fallback", s.Fallbacks},
		labelled{"lease_lost", s.LeasesLost},
		labelled{"payload_mismatch", s.PayloadMismatches})
	c.counters(ch, c.waits, s.Backend,
		labelled{"duplicate", s.WaitsDuplicate},
		labelled{"claimed", s.WaitsClaimed},
		labelled{"timed_out", s.WaitsTimedOut})
	c.counters(ch, c.faults, s.Backend,
		labelled{"ambiguous_claim", s.Ambiguous},
		labelled{"mark_deferred", s.Deferred},
		labelled{"mark_replayed", s.Replayed},
		labelled{"dropped", s.Dropped})
	ch <- prometheus.MustNewConstMetric(c.evicted, prometheus.CounterValue, float64(s.Evicted), s.Backend)
	for phase, l := range s.Latency {
		buckets := make(map[float64]uint64, len(c.buckets))
		for i, b := range c.buckets {
			buckets[b] = l.Buckets[i]
		}
		ch <- prometheus.MustNewConstHistogram(c.store, l.Count, l.Sum.Seconds(),
			buckets, s.Backend, phase)
	}
}
