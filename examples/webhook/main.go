// Command webhook serves a Telegram-style and a Slack-style webhook on one
// net/http server, deduplicated by the platform presets and the dedupehttp
// middleware, with Prometheus metrics on /metrics.
//
// Run without flags, it starts the server on a loopback port, plays the part of
// both platforms (a Telegram update delivered three times, one copy of it
// concurrently; a Slack event and its retry with X-Slack-Retry-Num; Slack's URL
// verification handshake), prints what the handlers saw and the decision
// counters from /metrics, and exits:
//
//	go run ./examples/webhook
//
// With -serve it keeps serving on -addr until interrupted.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	dedupeprom "github.com/gatewaykit/dedupe/prometheus"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	serve := flag.Bool("serve", false, "keep serving until interrupted instead of running the demo")
	flag.Parse()
	if err := run(*addr, *serve); err != nil {
		log.Fatal(err)
	}
}

// gateway is the demo's server: one Deduper per platform, since each platform
// has its own TTL, sharing one store and one metrics registry.
type gateway struct {
	mux      *http.ServeMux
	telegram atomic.Int64 // updates the Telegram handler processed
	slack    atomic.Int64 // events the Slack handler processed
}

func newGateway(store dedupe.Store) *gateway {
	g := &gateway{mux: http.NewServeMux()}
	reg := prometheus.NewRegistry()
	for _, p := range []struct {
		preset  platform.Preset
		handler http.HandlerFunc
	}{
		{platform.Telegram, g.handleTelegram},
		{platform.Slack, g.handleSlack},
	} {
		d := dedupe.New(store, dedupe.WithTTL(p.preset.TTL))
		reg.MustRegister(dedupeprom.NewCollector(d, dedupeprom.WithConstLabels(prometheus.Labels{"platform": p.preset.Name})))
		mw := dedupehttp.Middleware(d, dedupehttp.FromPreset(p.preset))
		g.mux.Handle("POST /"+p.preset.Name, mw(p.handler))
	}
	g.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return g
}

func (g *gateway) handleTelegram(w http.ResponseWriter, r *http.Request) {
	time.Sleep(50 * time.Millisecond) // the AI core thinking; copies arrive meanwhile
	g.telegram.Add(1)
	w.WriteHeader(http.StatusOK)
}

func (g *gateway) handleSlack(w http.ResponseWriter, r *http.Request) {
	body, _ := dedupehttp.Body(r)
	if strings.Contains(string(body), `"url_verification"`) {
		// Handshakes carry no message id: the middleware passes them through.
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
		return
	}
	g.slack.Add(1)
	w.WriteHeader(http.StatusOK)
}

func run(addr string, serve bool) error {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer store.Close()
	g := newGateway(store)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: g.mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Shutdown(context.Background())
	base := "http://" + ln.Addr().String()

	if serve {
		fmt.Println("serving on", base, "(POST /telegram, POST /slack, GET /metrics)")
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		defer stop()
		<-ctx.Done()
		return nil
	}

	update := `{"update_id": 870012345, "message": {"message_id": 42, "chat": {"id": -1001234567890, "type": "supergroup"}, "text": "hello bot"}}`
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ { // a delivery and a concurrent copy from a proxy's retry
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(base+"/telegram", update, nil)
		}()
	}
	wg.Wait()
	post(base+"/telegram", update, nil) // a late redelivery

	event := `{"token": "XXYYZZ", "team_id": "T0001", "type": "event_callback", "event_id": "Ev08MFMKH6", "event_time": 1764448112, "event": {"type": "app_mention", "text": "<@U0LAN0Z89> hi", "channel": "C0LAN2Q65"}}`
	post(base+"/slack", event, nil)
	post(base+"/slack", event, http.Header{"X-Slack-Retry-Num": {"1"}, "X-Slack-Retry-Reason": {"http_timeout"}})
	challenge := post(base+"/slack", `{"token": "XXYYZZ", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}`, nil)

	fmt.Printf("telegram: 3 deliveries of update 870012345, handler ran %d time(s)\n", g.telegram.Load())
	fmt.Printf("slack:    2 deliveries of event Ev08MFMKH6, handler ran %d time(s)\n", g.slack.Load())
	fmt.Printf("slack:    url_verification answered %q\n", challenge)
	fmt.Println("/metrics:")
	if err := printMetrics(base + "/metrics"); err != nil {
		return err
	}
	if g.telegram.Load() != 1 || g.slack.Load() != 1 {
		return errors.New("a message was processed more than once")
	}
	return nil
}

// post delivers body as a platform would and returns the response body.
func post(url, body string, h http.Header) string {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		log.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func printMetrics(url string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "dedupe_decisions_total{") && !strings.HasSuffix(line, " 0") {
			fmt.Println("  " + line)
		}
	}
	return sc.Err()
}
