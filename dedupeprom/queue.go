package dedupeprom

import (
	"context"
	"time"

	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/prometheus/client_golang/prometheus"
)

// depthTimeout bounds the queue look-ups of one scrape.
const depthTimeout = time.Second

// QueueCollector is a [prometheus.Collector] that exports, at scrape time,
// the queue metrics of [dedupehttp.Async] endpoints: how many accepted
// messages wait or run, what became of them, and how long their handlers
// took. Create one with [NewQueueCollector]. A QueueCollector is safe for
// concurrent use.
type QueueCollector struct {
	asyncs    []*dedupehttp.Async
	depth     *prometheus.Desc
	failed    *prometheus.Desc
	full      *prometheus.Desc
	processed *prometheus.Desc
	latency   *prometheus.Desc
	buckets   []float64 // dedupehttp.QueueLatencyBuckets in seconds
}

// NewQueueCollector returns a [QueueCollector] exporting, for asyncs, labelled
// with platform (each Async's [dedupehttp.Async.Name], the name of its
// [dedupehttp.WithVerify] preset; Asyncs with one name are summed):
//   - dedupe_queue_depth{platform}, a gauge of [dedupehttp.Async.Depth]: the
//     messages accepted and not yet settled, those of the memory tier of this
//     process and those of the Async's [queue.Queue], whichever process
//     queued them. A queue that does not answer within a second leaves its
//     platform's sample out of the scrape;
//   - dedupe_queue_failed{platform}, a gauge of the dead letters the
//     Asyncs' [queue.Queue] keeps ([queue.Counts].Failed): failed messages
//     that [queue.Queue.Requeue] can put back. An Async without a queue
//     adds nothing; a queue that does not answer leaves the sample out;
//   - dedupe_queue_full_total{platform}, a counter of the requests refused
//     with 503 because the queue was full ([dedupehttp.QueueStats].Full);
//   - dedupe_queue_processed_total{platform,outcome}, a counter of
//     [dedupehttp.QueueStats] by outcome: "success", "retried", "failed" and
//     "duplicate";
//   - dedupe_queue_processing_duration_seconds{platform}, a histogram of the handler
//     runs' durations, with [dedupehttp.QueueLatencyBuckets].
//
// [WithNamespace] and [WithConstLabels] apply as for [NewCollector]; the
// labels must not be named "platform" or "outcome".
func NewQueueCollector(asyncs []*dedupehttp.Async, opts ...Option) *QueueCollector {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	c := &QueueCollector{
		asyncs: append([]*dedupehttp.Async(nil), asyncs...),
		depth: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "queue_depth"),
			"Messages accepted with 202 and not yet settled: queued or being processed.",
			[]string{"platform"}, cfg.labels),
		failed: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "queue_failed"),
			"Failed messages kept by the durable queue (dead letters), which can be requeued by id.",
			[]string{"platform"}, cfg.labels),
		full: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "queue_full_total"),
			"Requests refused with 503 and Retry-After because the queue was full.",
			[]string{"platform"}, cfg.labels),
		processed: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "queue_processed_total"),
			"Accepted messages by outcome: success (handled and marked), retried (put back in the queue to be taken again), failed (the handler failed for good) and duplicate (settled without the handler: processed already).",
			[]string{"platform", "outcome"}, cfg.labels),
		latency: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "queue_processing_duration_seconds"),
			"Duration of the handler runs of accepted messages.",
			[]string{"platform"}, cfg.labels),
		buckets: make([]float64, len(dedupehttp.QueueLatencyBuckets)),
	}
	for i, b := range dedupehttp.QueueLatencyBuckets {
		c.buckets[i] = b.Seconds()
	}
	return c
}

// Describe sends the descriptors of the metrics the [QueueCollector] exports.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.failed
	ch <- c.full
	ch <- c.processed
	ch <- c.latency
}

// platformSums is what a QueueCollector adds up for one platform.
type platformSums struct {
	depth    int
	depthOK  bool
	failed   int
	failedOK bool
	queues   int // Asyncs with a queue
	stats    dedupehttp.QueueStats
}

// Collect sends the current depth of the Asyncs' queues and the values of
// their counters.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), depthTimeout)
	defer cancel()
	sums := map[string]*platformSums{}
	var order []string
	for _, a := range c.asyncs {
		name := a.Name()
		p, ok := sums[name]
		if !ok {
			p = &platformSums{depthOK: true, failedOK: true}
			sums[name] = p
			order = append(order, name)
		}
		n, err := a.Depth(ctx)
		p.depth += n
		p.depthOK = p.depthOK && err == nil
		if q := a.Queue(); q != nil {
			counts, err := q.Count(ctx)
			p.queues++
			p.failed += counts.Failed
			p.failedOK = p.failedOK && err == nil
		}
		s := a.QueueStats()
		p.stats.Success += s.Success
		p.stats.Retried += s.Retried
		p.stats.Failed += s.Failed
		p.stats.Duplicate += s.Duplicate
		p.stats.Full += s.Full
		p.stats.Latency.Count += s.Latency.Count
		p.stats.Latency.Sum += s.Latency.Sum
		for i := range s.Latency.Buckets {
			p.stats.Latency.Buckets[i] += s.Latency.Buckets[i]
		}
	}
	for _, name := range order {
		c.collect(ch, name, sums[name])
	}
}

// collect sends the metrics of one platform.
func (c *QueueCollector) collect(ch chan<- prometheus.Metric, name string, p *platformSums) {
	if p.depthOK {
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(p.depth), name)
	}
	if p.queues > 0 && p.failedOK {
		ch <- prometheus.MustNewConstMetric(c.failed, prometheus.GaugeValue, float64(p.failed), name)
	}
	s := p.stats
	ch <- prometheus.MustNewConstMetric(c.full, prometheus.CounterValue, float64(s.Full), name)
	for _, v := range []labelled{
		{"success", s.Success},
		{"retried", s.Retried},
		{"failed", s.Failed},
		{"duplicate", s.Duplicate},
	} {
		ch <- prometheus.MustNewConstMetric(c.processed, prometheus.CounterValue, float64(v.n), name, v.label)
	}
	buckets := make(map[float64]uint64, len(c.buckets))
	for i, b := range c.buckets {
		buckets[b] = s.Latency.Buckets[i]
	}
	ch <- prometheus.MustNewConstHistogram(c.latency, s.Latency.Count, s.Latency.Sum.Seconds(), buckets, name)
}
