// Command webhook serves every platform preset of the platform package from
// one net/http mux, each endpoint authenticated with its platform's secret
// and deduplicated over one Deduper, with Prometheus metrics on /metrics:
//
//	POST /telegram, /slack, /feishu, /discord, /onebot, /qq, /dingtalk,
//	     /webhooks (Standard Webhooks), /github, /stripe   dedupehttp.New
//	POST /line, /meta; PUT /matrix/_matrix/app/v1/transactions/{txnId}
//	                                                       dedupehttp.Events, a key per event
//	GET  /meta                                             Meta's subscription check (hub.challenge)
//	GET|POST /wechat, /wecom; POST /dingtalk-events        WXBizMsgCrypt (Preset.WithMsgCrypt)
//	POST /shopify                                          a source built from a JSON rule (platform.NewPreset)
//	GET  /metrics
//
// Run without -serve, it starts the server on a loopback port and plays each
// platform with platformtest's signers: a real delivery, its redeliveries and
// a forgery signed with a guessed secret. It prints a line per platform (the
// messages processed, the forgery's answer), the counters from /metrics, and
// exits with an error if a message was processed other than once or a
// forgery was not refused:
//
//	go run ./examples/webhook
//
// Each source's secret comes from -{name}-secret or an environment variable
// (-help lists them), with demo values by default; WeChat, WeCom and
// DingTalk's event subscriptions take "token,EncodingAESKey,receiverID".
// Meta's Verify Token is -meta-verify-token. -rule names a JSON file holding
// a platform.Rule to serve instead of the built-in Shopify one. In the demo,
// each value (the token, for the WXBizMsgCrypt platforms) seeds the
// platform's test signer (platformtest.NewSigner), which gives the endpoint
// the matching secret: the value itself, or keys derived from it for
// Discord, Standard Webhooks and the WXBizMsgCrypt platforms. With -serve it keeps serving on -addr until interrupted.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

func main() {
	c, err := parseFlags(flag.CommandLine, os.Args[1:])
	if err != nil {
		log.Fatal(err)
	}
	if c.serve {
		err = serve(c)
	} else {
		err = demo(c, os.Stdout)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// start serves srcs on c.addr and returns the gateway, its base URL and
// the function that stops it.
func start(c config, srcs []platform.Preset, opts ...dedupehttp.Option) (*gateway, string, func(), error) {
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	g := newGateway(store, srcs, opts...)
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		store.Close()
		return nil, "", nil, err
	}
	srv := &http.Server{Handler: g.mux, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	stop := func() {
		srv.Shutdown(context.Background())
		store.Close()
	}
	return g, "http://" + ln.Addr().String(), stop, nil
}

// serve serves the sources with the secrets of c until interrupted.
func serve(c config) error {
	srcs, err := sources(c)
	if err != nil {
		return err
	}
	for _, p := range srcs {
		if err := p.CheckSecret(); err != nil {
			log.Printf("%s: every delivery is refused: %v", p.Name, err)
		}
	}
	_, base, stop, err := start(c, srcs)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Println("serving on", base, "(POST /{platform}, GET /metrics; see go doc)")
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	<-ctx.Done()
	return nil
}

// demo plays every platform against the gateway and writes what came of it
// to out.
func demo(c config, out io.Writer) error {
	results, err := playDemo(c, out)
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.processed != int64(r.want) || r.forgedStatus != http.StatusUnauthorized || r.unauthenticated != 1 {
			return errors.New(r.source + ": a message was not processed exactly once, or a forgery was not refused")
		}
	}
	return nil
}

// playDemo runs the demo and returns a result per platform.
func playDemo(c config, out io.Writer) ([]result, error) {
	sig := signers(c.secrets)
	guessed := make(map[string]string, len(c.secrets))
	for name := range c.secrets {
		guessed[name] = "guessed-" + name
	}
	c.secrets = demoSecrets(c.secrets, sig)
	srcs, err := sources(c)
	if err != nil {
		return nil, err
	}
	for _, p := range srcs {
		if err := p.CheckSecret(); err != nil {
			return nil, err
		}
	}
	// The forgeries' warnings would only repeat the lines below.
	g, base, stop, err := start(c, srcs, dedupehttp.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return nil, err
	}
	defer stop()

	results, err := playAll(g, base, plays(sig, signers(guessed), c.secrets["rule"], time.Now()))
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		fmt.Fprintln(out, r)
	}
	if err := protocolChecks(base, c.metaVerifyToken, sig["slack"], out); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "/metrics:")
	return results, printMetrics(base+"/metrics", out)
}

// protocolChecks plays the requests that are not messages: Slack's URL
// verification, which the handler answers, and Meta's subscription check.
func protocolChecks(base, metaToken string, slack *platformtest.Signer, out io.Writer) error {
	_, challenge, err := post("/slack", []byte(slackHandshake), slack.Sign([]byte(slackHandshake), time.Now())).send(base)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "slack: url_verification answered %q\n", challenge)
	for _, token := range []string{metaToken, "guessed"} {
		q := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {token}, "hub.challenge": {"1158201444"}}
		status, body, err := delivery{method: http.MethodGet, target: "/meta?" + q.Encode()}.send(base)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "meta: subscription check with verify token %q answered %d %q\n", token, status, body)
	}
	return nil
}

// printMetrics writes the decisions of the Deduper from /metrics.
func printMetrics(url string, out io.Writer) error {
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
			fmt.Fprintln(out, "  "+line)
		}
	}
	return sc.Err()
}
