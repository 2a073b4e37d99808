package main

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupeprom"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// gateway is the demo's server: one mux, one Deduper for every source (each
// endpoint marks with its preset's TTL), one store and one metrics registry.
type gateway struct {
	mux       *http.ServeMux
	endpoints map[string]*dedupehttp.Handler // by source name
	processed map[string]*atomic.Int64       // messages (events) each source's handler processed
}

// newGateway serves each of srcs on the mux: POST /{name} for most, with
// dedupehttp.New for the platforms that post one message per delivery and
// dedupehttp.Events for those that post batches (LINE, Meta, Matrix), plus
// the GET requests of the platforms' URL checks, and GET /metrics.
// opts apply to every endpoint.
func newGateway(store dedupe.Store, srcs []platform.Preset, opts ...dedupehttp.Option) *gateway {
	g := &gateway{
		mux:       http.NewServeMux(),
		endpoints: make(map[string]*dedupehttp.Handler, len(srcs)),
		processed: make(map[string]*atomic.Int64, len(srcs)),
	}
	reg := prometheus.NewRegistry()
	d := dedupe.New(store)
	reg.MustRegister(dedupeprom.NewCollector(d))
	endpoints := make([]*dedupehttp.Handler, 0, len(srcs))
	for _, p := range srcs {
		n := new(atomic.Int64)
		g.processed[p.Name] = n
		var h *dedupehttp.Handler
		if p.Events != nil {
			h = dedupehttp.Events(d, p, func(r *http.Request, ev platform.Event) error {
				n.Add(1) // the AI core gets ev.Raw here
				return nil
			}, opts...)
		} else {
			h = dedupehttp.New(d, p, answer(p, n), opts...)
		}
		g.endpoints[p.Name] = h
		endpoints = append(endpoints, h)
		g.route(p, h)
	}
	reg.MustRegister(dedupeprom.NewHTTPCollector(endpoints))
	g.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	return g
}

// route serves h where p's platform delivers.
func (g *gateway) route(p platform.Preset, h http.Handler) {
	switch p.Name {
	case platform.Matrix.Name:
		// The registration's url is http://host/matrix; the homeserver
		// appends the path (Application Service API, Pushing events).
		g.mux.Handle("PUT /matrix/_matrix/app/v1/transactions/{txnId}", h)
		return
	case platform.Meta.Name:
		g.mux.HandleFunc("GET /meta", func(w http.ResponseWriter, r *http.Request) {
			challenge, ok := p.AnswerSubscription(r.URL.Query())
			if !ok {
				http.Error(w, "forbidden", http.StatusForbidden)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			_, _ = w.Write(challenge)
		})
	case platform.WeChat.Name, platform.WeCom.Name:
		g.mux.Handle("GET /"+p.Name, h) // the URL check (echostr): the middleware answers it
	}
	g.mux.Handle("POST /"+p.Name, h)
}

// answer returns the handler of a source that posts one message per
// delivery: it counts the message and answers as the platform expects.
func answer(p platform.Preset, n *atomic.Int64) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := dedupehttp.Body(r) // the plaintext, for the platforms that encrypt
		switch p.Name {
		case platform.Slack.Name:
			if strings.Contains(string(body), `"url_verification"`) {
				// Handshakes carry no message id: the middleware passes them through.
				w.Header().Set("Content-Type", "text/plain")
				_, _ = io.WriteString(w, "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P")
				return
			}
		case platform.Telegram.Name:
			time.Sleep(50 * time.Millisecond) // the AI core thinking; copies arrive meanwhile
		}
		n.Add(1)
		switch p.Name {
		case platform.WeChat.Name, platform.WeCom.Name:
			_, _ = io.WriteString(w, "success") // no passive reply
		case platform.DingTalkEvents.Name:
			sealed, err := p.Seal([]byte("success"), time.Now()) // or DingTalk takes the push as failed
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(sealed)
		case platform.Discord.Name:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"type":4,"data":{"content":"thinking…"}}`)
		default:
			w.WriteHeader(http.StatusOK)
		}
	}
}
