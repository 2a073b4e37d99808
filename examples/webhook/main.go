// Command webhook serves a Telegram and a Slack webhook on one net/http
// server, each authenticated with its platform's secret and deduplicated by
// dedupehttp.New over one Deduper, with Prometheus metrics on /metrics.
//
// Run without flags, it starts the server on a loopback port, plays the part of
// both platforms (a forged Telegram update, then the real one delivered three
// times, one copy of it concurrently; a Slack event and its retry with
// X-Slack-Retry-Num; Slack's URL verification handshake), prints what the
// handlers saw and the counters from /metrics, and exits:
//
//	go run ./examples/webhook
//
// The secrets come from -telegram-secret and -slack-secret, or the
// environment variables TELEGRAM_WEBHOOK_SECRET (the secret_token given to
// setWebhook) and SLACK_SIGNING_SECRET, with demo values by default. With
// -serve it keeps serving on -addr until interrupted.
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
	"github.com/gatewaykit/dedupe/dedupeprom"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	serve := flag.Bool("serve", false, "keep serving until interrupted instead of running the demo")
	var s secrets
	flag.StringVar(&s.telegram, "telegram-secret", envOr("TELEGRAM_WEBHOOK_SECRET", "demo-telegram-secret"),
		"Telegram webhook secret_token (env TELEGRAM_WEBHOOK_SECRET)")
	flag.StringVar(&s.slack, "slack-secret", envOr("SLACK_SIGNING_SECRET", "demo-slack-signing-secret"),
		"Slack signing secret (env SLACK_SIGNING_SECRET)")
	flag.Parse()
	if err := run(*addr, *serve, s); err != nil {
		log.Fatal(err)
	}
}

// secrets are the platforms' secrets.
type secrets struct{ telegram, slack string }

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// gateway is the demo's server: one Deduper for both platforms (each endpoint
// marks with its preset's TTL), one store and one metrics registry.
type gateway struct {
	mux      *http.ServeMux
	telegram atomic.Int64 // updates the Telegram handler processed
	slack    atomic.Int64 // events the Slack handler processed
}

func newGateway(store dedupe.Store, s secrets) *gateway {
	g := &gateway{mux: http.NewServeMux()}
	reg := prometheus.NewRegistry()
	d := dedupe.New(store)
	reg.MustRegister(dedupeprom.NewCollector(d))
	var endpoints []*dedupehttp.Handler
	for _, p := range []struct {
		preset  platform.Preset
		handler http.HandlerFunc
	}{
		{platform.Telegram.WithSecret(s.telegram), g.handleTelegram},
		{platform.Slack.WithSecret(s.slack), g.handleSlack},
	} {
		h := dedupehttp.New(d, p.preset, p.handler)
		endpoints = append(endpoints, h)
		g.mux.Handle("POST /"+p.preset.Name, h)
	}
	reg.MustRegister(dedupeprom.NewHTTPCollector(endpoints))
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

func run(addr string, serve bool, s secrets) error {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	defer store.Close()
	g := newGateway(store, s)
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

	// The platforms' side: they sign with the same secrets.
	tg := platformtest.NewSigner("telegram", s.telegram)
	sl := platformtest.NewSigner("slack", s.slack)
	update := `{"update_id": 870012345, "message": {"message_id": 42, "chat": {"id": -1001234567890, "type": "supergroup"}, "text": "hello bot"}}`
	forged := post(base+"/telegram", update, http.Header{"X-Telegram-Bot-Api-Secret-Token": {"guessed"}})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ { // a delivery and a concurrent copy from a proxy's retry
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(base+"/telegram", update, tg.Sign([]byte(update), time.Now()))
		}()
	}
	wg.Wait()
	post(base+"/telegram", update, tg.Sign([]byte(update), time.Now())) // a late redelivery

	event := `{"token": "XXYYZZ", "team_id": "T0001", "type": "event_callback", "event_id": "Ev08MFMKH6", "event_time": 1764448112, "event": {"type": "app_mention", "text": "<@U0LAN0Z89> hi", "channel": "C0LAN2Q65"}}`
	post(base+"/slack", event, sl.Sign([]byte(event), time.Now()))
	retry := sl.Sign([]byte(event), time.Now())
	retry.Set("X-Slack-Retry-Num", "1")
	retry.Set("X-Slack-Retry-Reason", "http_timeout")
	post(base+"/slack", event, retry)
	handshake := `{"token": "XXYYZZ", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", "type": "url_verification"}`
	challenge := post(base+"/slack", handshake, sl.Sign([]byte(handshake), time.Now()))

	fmt.Printf("telegram: a forged update was answered %q\n", strings.TrimSpace(forged))
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
		if (strings.HasPrefix(line, "dedupe_decisions_total{") || strings.HasPrefix(line, "dedupe_http_deliveries_total{")) &&
			!strings.HasSuffix(line, " 0") {
			fmt.Println("  " + line)
		}
	}
	return sc.Err()
}
