package dedupehttp

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
)

// messageVersion is the version of the encoding of [Message.MarshalBinary].
const messageVersion = 1

// wireMessage is the encoding of a [Message]: JSON, versioned, with the body
// in base64.
type wireMessage struct {
	V         int         `json:"v"`
	ID        string      `json:"id"`
	Channel   string      `json:"ch"`
	MessageID string      `json:"mid"`
	Method    string      `json:"m"`
	Target    string      `json:"t"`
	Host      string      `json:"h,omitempty"`
	Header    http.Header `json:"hd,omitempty"`
	Body      []byte      `json:"b"`
	TraceID   string      `json:"tr,omitempty"`
	Accepted  int64       `json:"at"` // Unix nanoseconds
}

// MarshalBinary encodes m for a [Queue] that stores bytes. The encoding is
// versioned: a later version of this package reads what an earlier one
// wrote.
func (m Message) MarshalBinary() ([]byte, error) {
	return json.Marshal(wireMessage{
		V: messageVersion, ID: m.ID, Channel: m.Key.Channel, MessageID: m.Key.MessageID,
		Method: m.Method, Target: m.Target, Host: m.Host, Header: m.Header,
		Body: m.Body, TraceID: m.TraceID, Accepted: m.Accepted.UnixNano(),
	})
}

// UnmarshalBinary decodes what [Message.MarshalBinary] encoded into m. It
// refuses an unknown version, and a message without an id or a valid key.
func (m *Message) UnmarshalBinary(b []byte) error {
	var w wireMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("dedupe: dedupehttp: queued message: %w", err)
	}
	if w.V != messageVersion {
		return fmt.Errorf("dedupe: dedupehttp: queued message: version %d, want %d", w.V, messageVersion)
	}
	if w.ID == "" {
		return errors.New("dedupe: dedupehttp: queued message: no id")
	}
	k := dedupe.Key{Channel: w.Channel, MessageID: w.MessageID}
	if err := k.Validate(); err != nil {
		return fmt.Errorf("dedupe: dedupehttp: queued message %s: %w", w.ID, err)
	}
	*m = Message{
		ID: w.ID, Key: k, Method: w.Method, Target: w.Target, Host: w.Host,
		Header: w.Header, Body: w.Body, TraceID: w.TraceID, Accepted: time.Unix(0, w.Accepted),
	}
	return nil
}

// NewReceipt returns a new random receipt for a [Delivery]: 128 bits from
// crypto/rand in base32. Queue implementations call it in Take.
func NewReceipt() string { return rand.Text() }

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
// message in its [Queue] ([WithQueue], [WithOverflow]), for the handler that
// serves it from the queue: the canonical forms of names. By default every
// header is stored but those of the connection (Connection, Keep-Alive,
// Transfer-Encoding, Upgrade, …) and credentials (Authorization, Cookie and
// Telegram's X-Telegram-Bot-Api-Secret-Token, which is the webhook's
// secret): a handler behind [WithVerify] reads a message that was
// authenticated already. The signature headers of the other platforms are
// stored; they only sign this body. [Middleware] and the memory tier of an
// Async, which hand the handler the request itself, ignore it.
func WithQueuedHeaders(names ...string) Option {
	return func(c *config) {
		c.queuedHeaders = make(map[string]bool, len(names))
		for _, n := range names {
			c.queuedHeaders[http.CanonicalHeaderKey(n)] = true
		}
	}
}

// queuedHeader returns the headers of h to queue.
func (c *config) queuedHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
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
func (c *config) newMessage(r *http.Request, key dedupe.Key, data []byte) Message {
	return Message{
		ID: newMessageID(), Key: key, Method: r.Method, Target: r.URL.RequestURI(), Host: r.Host,
		Header: c.queuedHeader(r.Header), Body: data, TraceID: dedupe.TraceID(r.Context()),
		Accepted: time.Now(),
	}
}

// request rebuilds the request of m for its handler, with ctx (which carries
// the delivery) as its context.
func (m *Message) request(ctx *delivery) (*http.Request, error) {
	r, err := http.NewRequestWithContext(ctx, m.Method, m.Target, nil)
	if err != nil {
		return nil, fmt.Errorf("dedupe: dedupehttp: queued message %s: %w", m.ID, err)
	}
	r.RequestURI = m.Target
	r.Host = m.Host
	r.Header = m.Header
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

// handlerContext returns the context a queued message's handler runs with:
// its queue id, trace id, key and verdict, and cancel, which the caller
// calls when the message is done.
func (m *Message) handlerContext() (*delivery, context.CancelFunc) {
	base := context.WithValue(context.Background(), queueIDKey{}, m.ID)
	if m.TraceID != "" {
		base = dedupe.ContextWithTraceID(base, m.TraceID)
	}
	ctx, cancel := context.WithCancel(base)
	return &delivery{Context: ctx, key: m.Key, verdict: VerdictNew}, cancel
}
