package dedupeprom_test

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupeprom"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
)

func TestHTTPCollector(t *testing.T) {
	quiet := dedupehttp.WithLogger(slog.New(slog.DiscardHandler))
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	d := dedupe.New(nil)
	tg := dedupehttp.New(d, platform.Telegram.WithSecret("s"), ok, quiet)
	ob := dedupehttp.New(d, platform.OneBot, ok, quiet)
	send := func(h http.Handler, body string) {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	}
	send(tg, `{"update_id":1}`) // no secret token
	send(tg, `{"update_id":2}`)
	send(ob, `{"post_type":"message","message_id":3}`)                   // no bot id
	send(ob, `{"post_type":"meta_event","meta_event_type":"heartbeat"}`) // protocol
	send(ob, `{"post_type":`)                                            // malformed

	c := dedupeprom.NewHTTPCollector([]*dedupehttp.Handler{tg, ob}, dedupeprom.WithNamespace("gw"))
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(c))
	want := `
# HELP gw_dedupe_http_deliveries_total Webhook deliveries the middleware decided on before the deduplicator: forbidden (refused with 403 by the source filter), unauthenticated (refused with 401), undeduplicated (no usable message id: served without deduplication, or refused), protocol (handshakes) and malformed (refused with 400).
# TYPE gw_dedupe_http_deliveries_total counter
gw_dedupe_http_deliveries_total{platform="onebot",verdict="forbidden"} 0
gw_dedupe_http_deliveries_total{platform="onebot",verdict="malformed"} 1
gw_dedupe_http_deliveries_total{platform="onebot",verdict="protocol"} 1
gw_dedupe_http_deliveries_total{platform="onebot",verdict="unauthenticated"} 0
gw_dedupe_http_deliveries_total{platform="onebot",verdict="undeduplicated"} 1
gw_dedupe_http_deliveries_total{platform="telegram",verdict="forbidden"} 0
gw_dedupe_http_deliveries_total{platform="telegram",verdict="malformed"} 0
gw_dedupe_http_deliveries_total{platform="telegram",verdict="protocol"} 0
gw_dedupe_http_deliveries_total{platform="telegram",verdict="unauthenticated"} 2
gw_dedupe_http_deliveries_total{platform="telegram",verdict="undeduplicated"} 0
`
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want)))

	// Two handlers of one name are summed.
	twice := `
# HELP dedupe_http_deliveries_total Webhook deliveries the middleware decided on before the deduplicator: forbidden (refused with 403 by the source filter), unauthenticated (refused with 401), undeduplicated (no usable message id: served without deduplication, or refused), protocol (handshakes) and malformed (refused with 400).
# TYPE dedupe_http_deliveries_total counter
dedupe_http_deliveries_total{platform="telegram",verdict="forbidden"} 0
dedupe_http_deliveries_total{platform="telegram",verdict="malformed"} 0
dedupe_http_deliveries_total{platform="telegram",verdict="protocol"} 0
dedupe_http_deliveries_total{platform="telegram",verdict="unauthenticated"} 4
dedupe_http_deliveries_total{platform="telegram",verdict="undeduplicated"} 0
`
	require.NoError(t, testutil.CollectAndCompare(dedupeprom.NewHTTPCollector([]*dedupehttp.Handler{tg, tg}), strings.NewReader(twice)))
}
