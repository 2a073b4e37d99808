package dedupehttp

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/queue"
)

// newMessageID returns a queue id unique across processes and restarts.
func newMessageID() string { return rand.Text() }

// hopHeaders are the request headers that [Async] never queues: those of one
// connection, and credentials.
var hopHeaders = map[string]bool{
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true,
	"X-Telegram-Bot-Api-Secret-Token": true, // Telegram's secret itself
}

// WithQueuedHeaders sets which request headers an [Async] stores with a
// message in its [queue.Queue] ([WithQueue], [WithOverflow]), for the handler that
// serves it from the queue: the canonical forms of names. By default every
// header is stored but those of the connection (Connection, Keep-Alive,
// Transfer-Encoding, Upgrade, …) and credentials (Authorization, Cookie and
// Telegram's X-Telegram-Bot-Api-Secret-Token, which is the webhook's
// secret): a handler behind [WithVerify] reads a message that was
// authenticated already. The signature headers of the other platforms are
// stored; they only sign this body. The memory tier of an Async, which
// hands the handler the request itself, does not read it.
func WithQueuedHeaders(names ...string) AsyncOption {
	return asyncOption(func(c *config) {
		c.queuedHeaders = make(map[string]bool, len(names))
		for _, n := range names {
			c.queuedHeaders[http.CanonicalHeaderKey(n)] = true
		}
	})
}

// queuedHeader returns the headers of h to queue.
func (c *config) queuedHeader(h http.Header) queue.Header {
	out := make(queue.Header, len(h))
	for name, vs := range h {
		keep := !hopHeaders[name]
		if c.queuedHeaders != nil {
			keep = c.queuedHeaders[name]
		}
		if keep {
			out[name] = append([]string(nil), vs...)
		}
	}
	return out
}

// newMessage returns the message to queue for r, authenticated and keyed
// with key.
func (c *config) newMessage(r *http.Request, key dedupe.Key, data []byte) queue.Message {
	return queue.Message{
		ID: newMessageID(), Key: key, Method: r.Method, Target: r.URL.RequestURI(), Host: r.Host,
		Header: c.queuedHeader(r.Header), Body: data, TraceID: dedupe.TraceID(r.Context()),
		Accepted: time.Now(),
	}
}

// messageRequest rebuilds the request of m for its handler, with ctx (which carries
// the delivery) as its context.
func messageRequest(m *queue.Message, ctx *delivery) (*http.Request, error) {
	r, err := http.NewRequestWithContext(ctx, m.Method, m.Target, nil)
	if err != nil {
		return nil, fmt.Errorf("dedupe: dedupehttp: queued message %s: %w", m.ID, err)
	}
	r.RequestURI = m.Target
	r.Host = m.Host
	r.Header = http.Header(m.Header)
	if r.Header == nil {
		r.Header = make(http.Header)
	}
	ctx.body.set(m.Body)
	r.Body = &ctx.body
	r.ContentLength = int64(len(m.Body))
	if len(m.Body) > 0 {
		r.Header.Set("Content-Length", strconv.Itoa(len(m.Body)))
	}
	return r, nil
}

// messageContext returns the context a queued message's handler runs with:
// its queue id, trace id, key and verdict, and cancel, which the caller
// calls when the message is done.
func messageContext(m *queue.Message) (*delivery, context.CancelFunc) {
	base := context.WithValue(context.Background(), queueIDKey{}, m.ID)
	if m.TraceID != "" {
		base = dedupe.ContextWithTraceID(base, m.TraceID)
	}
	ctx, cancel := context.WithCancel(base)
	return &delivery{Context: ctx, key: m.Key, verdict: VerdictNew}, cancel
}
