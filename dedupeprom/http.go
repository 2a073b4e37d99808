package dedupeprom

import (
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/prometheus/client_golang/prometheus"
)

// HTTPCollector is a [prometheus.Collector] that exports, at scrape time, the
// counters of webhook endpoints built by [dedupehttp.New]: what each refused
// or passed through before the Deduper ([dedupehttp.Stats]). Create one with
// [NewHTTPCollector]. An HTTPCollector is safe for concurrent use.
type HTTPCollector struct {
	handlers   []*dedupehttp.Handler
	deliveries *prometheus.Desc
}

// NewHTTPCollector returns an [HTTPCollector] exporting the counters of
// handlers as dedupe_http_deliveries_total{platform,verdict}, platform being
// each handler's [dedupehttp.Handler.Name]; handlers with one name are
// summed. [WithNamespace] and [WithConstLabels] apply as for [NewCollector];
// the labels must not be named "platform" or "verdict".
func NewHTTPCollector(handlers []*dedupehttp.Handler, opts ...Option) *HTTPCollector {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	return &HTTPCollector{
		handlers: append([]*dedupehttp.Handler(nil), handlers...),
		deliveries: prometheus.NewDesc(
			prometheus.BuildFQName(cfg.namespace, "dedupe", "http_deliveries_total"),
			"Webhook deliveries the middleware decided on before the deduplicator: forbidden (refused with 403 by the source filter), unauthenticated (refused with 401), undeduplicated (no usable message id: served without deduplication, or refused), protocol (handshakes) and malformed (refused with 400).",
			[]string{"platform", "verdict"}, cfg.labels),
	}
}

// Describe sends the descriptor of the metric the [HTTPCollector] exports.
func (c *HTTPCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.deliveries }

// Collect sends the current values of the handlers' counters.
func (c *HTTPCollector) Collect(ch chan<- prometheus.Metric) {
	sums := map[string]*dedupehttp.Stats{}
	var order []string
	for _, h := range c.handlers {
		s, ok := sums[h.Name()]
		if !ok {
			s = new(dedupehttp.Stats)
			sums[h.Name()] = s
			order = append(order, h.Name())
		}
		st := h.Stats()
		s.Forbidden += st.Forbidden
		s.Unauthenticated += st.Unauthenticated
		s.Undeduplicated += st.Undeduplicated
		s.Protocol += st.Protocol
		s.Malformed += st.Malformed
	}
	for _, name := range order {
		s := sums[name]
		for _, v := range []labelled{
			{"forbidden", s.Forbidden},
			{"unauthenticated", s.Unauthenticated},
			{"undeduplicated", s.Undeduplicated},
			{"protocol", s.Protocol},
			{"malformed", s.Malformed},
		} {
			ch <- prometheus.MustNewConstMetric(c.deliveries, prometheus.CounterValue, float64(v.n), name, v.label)
		}
	}
}
