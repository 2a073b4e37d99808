package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/idempotency"
)

// model is the fake LLM: it counts its calls and takes delay to answer.
// started, if not nil, is told when a call starts; while hold holds a
// channel, a call also waits for it to close, so that the demo knows the
// call is still running whatever the machine's load.
type model struct {
	calls   atomic.Int64
	delay   time.Duration
	started chan string
	hold    atomic.Pointer[chan struct{}]
}

// complete answers prompt, after the delay or ctx's end.
func (m *model) complete(ctx context.Context, prompt string) (string, int64, error) {
	n := m.calls.Add(1)
	if m.started != nil {
		m.started <- prompt
	}
	if hold := m.hold.Load(); hold != nil {
		select {
		case <-ctx.Done():
			return "", n, ctx.Err()
		case <-*hold:
		}
	}
	t := time.NewTimer(m.delay)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return "", n, ctx.Err()
	case <-t.C:
	}
	return fmt.Sprintf("You said %q. (model call #%d)", prompt, n), n, nil
}

// messageIn and messageOut are the bodies of POST /v1/messages.
type (
	messageIn struct {
		Message string `json:"message"`
	}
	messageOut struct {
		ID    string `json:"id"`
		Reply string `json:"reply"`
	}
)

// messages is the agent's endpoint: it asks the model and answers 201 with
// its reply, or 502 if the model failed (not stored: the retry asks again).
func messages(m *model) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in messageIn
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Message == "" {
			http.Error(w, `want {"message": "..."}`, http.StatusBadRequest)
			return
		}
		reply, n, err := m.complete(r.Context(), in.Message)
		if err != nil {
			http.Error(w, "model failed: "+err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Location", fmt.Sprintf("/v1/messages/msg_%d", n))
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(messageOut{ID: fmt.Sprintf("msg_%d", n), Reply: reply})
	}
}

// gateway is a running agent gateway on a loopback port.
type gateway struct {
	d   *dedupe.Deduper
	srv *http.Server
	url string
	end chan error
}

// startGateway serves the agent's API with the model over store, keys
// scoped by the caller's Authorization header, and a retry of a request in
// flight waiting for it.
func startGateway(store dedupe.Store, m *model) (*gateway, error) {
	d := dedupe.New(store)
	mw := idempotency.Middleware(d,
		idempotency.WithScope(func(r *http.Request) string { return r.Header.Get("Authorization") }),
		idempotency.WithWait(time.Minute))
	mux := http.NewServeMux()
	mux.Handle("POST /v1/messages", mw(messages(m)))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		d.Close()
		return nil, err
	}
	g := &gateway{d: d, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		url: "http://" + ln.Addr().String(), end: make(chan error, 1)}
	go func() { g.end <- g.srv.Serve(ln) }()
	return g, nil
}

// stop shuts the gateway down, waiting for the requests it serves, and
// closes its Deduper (not the store).
func (g *gateway) stop(ctx context.Context) error {
	err := g.srv.Shutdown(ctx)
	if serr := <-g.end; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	g.d.Close()
	return err
}
