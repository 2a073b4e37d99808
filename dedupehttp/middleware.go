package dedupehttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
)

// Headers set on the answers that the middleware gives itself, without the
// handler.
const (
	// HeaderVerdict tells why the middleware answered: "duplicate",
	// "in_flight", "queued" (accepted by [Async]) or "unavailable" (a 503: the
	// store failed, the queue is full or the [Async] is closed).
	HeaderVerdict = "X-Dedupe-Verdict"
	// HeaderQueueID carries the id [Async] gave a request it queued; the
	// handler finds it with [QueueID].
	HeaderQueueID = "X-Dedupe-Queue-Id"
)

// Defaults of the options.
const (
	// DefaultMaxBodySize is the largest request body read by default, 1 MiB
	// (see [WithMaxBodySize]).
	DefaultMaxBodySize = 1 << 20
	// DefaultRetryAfter is the default Retry-After of a 503 answer (see
	// [WithRetryAfter]).
	DefaultRetryAfter = 5 * time.Second
)

// Errors of this package, as seen by [WithExtractError] policies and the
// func set by [WithDone]. Match them with [errors.Is].
var (
	// ErrHandlerFailed reports a handler that answered with a failure status
	// (see [WithFailureStatus]) or panicked. The message's claim was released.
	ErrHandlerFailed = errors.New("dedupe: dedupehttp: handler failed")
	// ErrQueueFull reports a request that [Async] refused with 503 because its
	// queue was full. The message's claim was released, so the platform's
	// retry is processed.
	ErrQueueFull = errors.New("dedupe: dedupehttp: queue full")
	// ErrAbandoned reports a request queued by [Async] that [Async.Close] gave
	// up on before it was processed. Its claim was released.
	ErrAbandoned = errors.New("dedupe: dedupehttp: abandoned at close")
)

// Extractor returns the [dedupe.Key] of a webhook delivery. The middleware
// has buffered the body: an Extractor may read r.Body, or get the bytes
// without a copy from [Body], and the handler still sees the whole body.
//
// An Extractor returns an error wrapping [dedupe.ErrNoMessageID] for a
// request that carries no message (a platform handshake such as a Slack
// url_verification): by default such requests reach the handler without
// deduplication. See [DefaultExtractError] for the other errors.
type Extractor func(r *http.Request) (dedupe.Key, error)

// FromPreset returns an [Extractor] that extracts keys with the platform
// preset p from the request's body and headers, using [platform.Preset.Extract].
func FromPreset(p platform.Preset) Extractor {
	return func(r *http.Request) (dedupe.Key, error) {
		b, err := Body(r)
		if err != nil {
			return dedupe.Key{}, err
		}
		return p.Extract(b, r.Header)
	}
}

// Body returns the whole body of r. For a request seen by an [Extractor] or a
// handler behind [Middleware] or [Async], it returns the buffered body without
// copying or reading it, whatever was read from r.Body already; the caller must
// not modify the slice. For any other request, it reads r.Body to the end and
// replaces it with a reader over the bytes, so that the body can be read again.
func Body(r *http.Request) ([]byte, error) {
	if b, ok := r.Body.(*body); ok {
		return b.data, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = newBody(data)
	return data, nil
}

// body is a buffered request body. Body recognises it.
type body struct {
	bytes.Reader
	data []byte
}

func newBody(data []byte) *body {
	b := &body{data: data}
	b.Reset(data)
	return b
}

// Close does nothing: the original body was read to its end, and the server
// closes it.
func (*body) Close() error { return nil }

// An Option configures [Middleware] or [NewAsync]. Each constructor takes
// options alone; the options of an [Async]'s queue ([WithWorkers],
// [WithQueueSize], [WithAcceptedStatus], [WithDone]) are ignored by
// [Middleware].
type Option func(*config)

type config struct {
	maxBody      int64
	duplicate    http.Handler
	inFlight     http.Handler
	extractError func(http.ResponseWriter, *http.Request, error) bool
	failed       func(status int) bool
	retryAfter   string
	logger       *slog.Logger

	// Read by Async alone.
	workers        int
	queueSize      int
	acceptedStatus int
	done           func(context.Context, dedupe.Key, error)
}

func newConfig(opts []Option) *config {
	c := &config{
		maxBody:      DefaultMaxBodySize,
		duplicate:    http.HandlerFunc(answerOK),
		inFlight:     http.HandlerFunc(answerOK),
		extractError: DefaultExtractError,
		failed:       func(status int) bool { return status >= 500 },
		logger:       slog.Default(),

		workers:        DefaultWorkers,
		queueSize:      DefaultQueueSize,
		acceptedStatus: http.StatusAccepted,
	}
	WithRetryAfter(DefaultRetryAfter)(c)
	for _, o := range opts {
		o(c)
	}
	return c
}

func answerOK(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

// WithMaxBodySize sets the largest request body the middleware reads (default
// [DefaultMaxBodySize]). A larger body is answered 413 Request Entity Too Large
// and reaches neither the extractor nor the handler. n <= 0 keeps the default.
func WithMaxBodySize(n int64) Option {
	return func(c *config) {
		if n > 0 {
			c.maxBody = n
		}
	}
}

// WithDuplicate sets the handler that answers a message already processed.
// The default answers 200 OK with an empty body, so that the platform stops
// redelivering. The message's own handler never sees a duplicate.
func WithDuplicate(h http.Handler) Option {
	return func(c *config) {
		if h != nil {
			c.duplicate = h
		}
	}
}

// WithInFlight sets the handler that answers a copy of a message that another
// request is processing right now. The default answers 200 OK with an empty
// body: the owner will finish, or fail and have the platform redeliver its own
// copy. A gateway that would rather have the platform retry the copy answers,
// for example, 503 with a Retry-After header. Do so if the handler can outlast
// the platform's timeout and then fail: the platform takes the copy's 200 as
// the delivery, so the message is lost when the owner fails after its own
// request timed out ([Async] avoids the case by answering at once).
func WithInFlight(h http.Handler) Option {
	return func(c *config) {
		if h != nil {
			c.inFlight = h
		}
	}
}

// WithExtractError sets the policy for a request whose key the [Extractor]
// could not find (default [DefaultExtractError]). The policy either returns
// true, and the request reaches the handler without deduplication, or answers
// the request itself and returns false. It must not read the body.
func WithExtractError(f func(w http.ResponseWriter, r *http.Request, err error) bool) Option {
	return func(c *config) {
		if f != nil {
			c.extractError = f
		}
	}
}

// WithFailureStatus sets which statuses of the handler's answer count as a
// failure: the claim is then released instead of the message being marked, so
// that the platform's retry is processed. The default is status >= 500. A
// handler that panics has always failed. A gateway whose handler answers 429
// to ask for a retry can use
//
//	dedupehttp.WithFailureStatus(func(s int) bool { return s >= 500 || s == 429 })
func WithFailureStatus(failed func(status int) bool) Option {
	return func(c *config) {
		if failed != nil {
			c.failed = failed
		}
	}
}

// WithRetryAfter sets the Retry-After of the middleware's 503 answers (default
// [DefaultRetryAfter]), rounded up to whole seconds and at least 1.
func WithRetryAfter(d time.Duration) Option {
	return func(c *config) {
		secs := max(1, int64((d+time.Second-1)/time.Second))
		c.retryAfter = strconv.FormatInt(secs, 10)
	}
}

// WithLogger sets the logger for the middleware's own records: refused
// requests at debug level, a full queue at warn, and at error level the
// failures of requests [Async] had already accepted, which the platform will
// not redeliver. The default is [slog.Default]. The [dedupe.Deduper] logs its
// verdicts and store errors to its own logger.
func WithLogger(l *slog.Logger) Option {
	return func(c *config) {
		if l != nil {
			c.logger = l
		}
	}
}

// DefaultExtractError is the default policy of [WithExtractError]:
//   - An error wrapping [dedupe.ErrNoMessageID] (and so [platform.ErrNotAMessage])
//     means a request that carries no message, such as a Slack or Feishu
//     url_verification challenge, a Discord PING or a OneBot heartbeat: it
//     passes to the handler without deduplication, and the handler answers
//     it.
//     So does a request with an empty body, such as a GET that verifies the
//     webhook's URL.
//   - A non-empty body that is not JSON, or JSON of the wrong shape (an error
//     wrapping a [*json.SyntaxError] or a [*json.UnmarshalTypeError]), an
//     invalid id ([dedupe.ErrInvalidKey]) and any other error are answered 400
//     Bad Request, with the error in the body.
func DefaultExtractError(w http.ResponseWriter, r *http.Request, err error) bool {
	if errors.Is(err, dedupe.ErrNoMessageID) {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if b, _ := Body(r); len(b) == 0 || !errors.As(err, &syntax) && !errors.As(err, &typ) {
			return true
		}
	}
	http.Error(w, "bad request: "+err.Error(), http.StatusBadRequest)
	return false
}

// next tells a handler what to do with a request after prepare.
type next int

const (
	nextDedupe next = iota // deduplicate under the key
	nextPass               // serve without deduplication
	nextDone               // answered already
)

// prepare buffers r's body, extracts its key and applies the extract-error
// policy. It returns a shallow copy of r whose Body reads the buffer.
func (c *config) prepare(w http.ResponseWriter, r *http.Request, extract Extractor) (*http.Request, dedupe.Key, next) {
	data, err := c.readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			c.debug(r.Context(), "dedupe: dedupehttp: request body too large", slog.Int64("limit", c.maxBody))
			http.Error(w, fmt.Sprintf("request body larger than %d bytes", c.maxBody), http.StatusRequestEntityTooLarge)
		} else {
			c.debug(r.Context(), "dedupe: dedupehttp: cannot read request body", slog.Any("error", err))
			http.Error(w, "cannot read request body", http.StatusBadRequest)
		}
		return nil, dedupe.Key{}, nextDone
	}
	b := newBody(data)
	r2 := new(http.Request)
	*r2 = *r // handlers must not modify the request they are given
	r2.Body = b
	key, err := extract(r2)
	b.Reset(data)
	r2.Body = b
	if err == nil {
		return r2, key, nextDedupe
	}
	return r2, key, c.extractFailed(w, r2, err)
}

func (c *config) extractFailed(w http.ResponseWriter, r *http.Request, err error) next {
	if c.extractError(w, r, err) {
		c.debug(r.Context(), "dedupe: dedupehttp: served without deduplication", slog.Any("error", err))
		return nextPass
	}
	c.debug(r.Context(), "dedupe: dedupehttp: no key, refused", slog.Any("error", err))
	return nextDone
}

// readBody reads r's body, up to c.maxBody bytes.
func (c *config) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > c.maxBody {
		w.Header().Set("Connection", "close") // do not read the rest
		return nil, &http.MaxBytesError{Limit: c.maxBody}
	}
	rd := http.MaxBytesReader(w, r.Body, c.maxBody)
	size := 512
	if r.ContentLength >= 0 {
		size = int(r.ContentLength) + 1 // room to read io.EOF without growing
	}
	buf := make([]byte, 0, size)
	for {
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// answer answers a request whose Deduper.Do did not run the handler.
func (c *config) answer(w http.ResponseWriter, r *http.Request, h http.Handler, err error) {
	switch {
	case errors.Is(err, dedupe.ErrDuplicate):
		w.Header().Set(HeaderVerdict, "duplicate")
		c.duplicate.ServeHTTP(w, r)
	case errors.Is(err, dedupe.ErrInFlight):
		w.Header().Set(HeaderVerdict, "in_flight")
		c.inFlight.ServeHTTP(w, r)
	case errors.Is(err, dedupe.ErrInvalidKey):
		if c.extractFailed(w, r, err) == nextPass {
			h.ServeHTTP(w, r)
		}
	default: // the store failed; the Deduper logged it
		c.unavailable(w, "message store unavailable")
	}
}

// unavailable answers 503 with Retry-After, so that the platform retries.
func (c *config) unavailable(w http.ResponseWriter, why string) {
	w.Header().Set("Retry-After", c.retryAfter)
	w.Header().Set(HeaderVerdict, "unavailable")
	http.Error(w, why+", retry later", http.StatusServiceUnavailable)
}

func (c *config) debug(ctx context.Context, msg string, attrs ...slog.Attr) {
	if c.logger.Enabled(ctx, slog.LevelDebug) {
		c.log(ctx, slog.LevelDebug, msg, attrs...)
	}
}

func (c *config) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if id := dedupe.TraceID(ctx); id != "" {
		attrs = append(attrs, slog.String("trace_id", id))
	}
	c.logger.LogAttrs(ctx, level, msg, attrs...)
}

// Middleware returns middleware that deduplicates webhook deliveries with d,
// keyed by extract. For each request it:
//   - reads the body once, up to [WithMaxBodySize] (413 beyond), and hands it
//     on intact: the extractor and then the handler each read all of it;
//   - runs the handler inside [dedupe.Deduper.Do] with the request's context,
//     so the store calls honour its cancellation and see its values;
//   - answers a duplicate with 200 OK (see [WithDuplicate]) and a copy in
//     flight with 200 OK (see [WithInFlight]); neither reaches the handler;
//   - marks the message processed when the handler has answered, and
//     releases its claim instead when the handler answered with a failure
//     status (>= 500, see [WithFailureStatus]) or panicked, so that the
//     platform's retry is processed (the panic goes on to the server);
//   - answers 503 with Retry-After when the store fails, so that the
//     platform retries later (the Deduper fails closed, unless it was given
//     [dedupe.WithFallback]);
//   - applies [WithExtractError] when extract fails: by default, requests
//     without a message id pass to the handler undeduplicated and malformed
//     ones get 400.
//
// The handler runs on the request's goroutine, so the platform waits for it;
// see [Async] for handlers slower than the platform's timeout. The
// ResponseWriter the handler gets implements [http.Flusher] and unwraps for
// [http.ResponseController]. d and extract must not be nil.
func Middleware(d *dedupe.Deduper, extract Extractor, opts ...Option) func(http.Handler) http.Handler {
	c := newConfig(opts)
	return func(h http.Handler) http.Handler {
		return &handler{d: d, extract: extract, next: h, c: c}
	}
}

type handler struct {
	d       *dedupe.Deduper
	extract Extractor
	next    http.Handler
	c       *config
}

// ServeHTTP deduplicates r and serves it as [Middleware] says.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	r, key, next := h.c.prepare(w, r, h.extract)
	switch next {
	case nextDone:
		return
	case nextPass:
		h.next.ServeHTTP(w, r)
		return
	}
	run := &run{ResponseWriter: w, h: h, r: r}
	if err := h.d.Do(r.Context(), key, run.serve); !run.ran {
		h.c.answer(w, r, h.next, err)
	}
}

// run serves one request under a claim, and records the status the handler
// answers with. The handler gets it as its ResponseWriter.
type run struct {
	http.ResponseWriter
	h      *handler
	r      *http.Request
	status int
	ran    bool
}

func (rn *run) serve(ctx context.Context) error {
	rn.ran = true
	r := rn.r
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	rn.h.next.ServeHTTP(rn, r)
	if rn.status == 0 {
		rn.status = http.StatusOK
	}
	if rn.h.c.failed(rn.status) {
		return fmt.Errorf("%w: status %d", ErrHandlerFailed, rn.status)
	}
	return nil
}

// WriteHeader records the first final status and passes it on.
func (rn *run) WriteHeader(code int) {
	if rn.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		rn.status = code
	}
	rn.ResponseWriter.WriteHeader(code)
}

// Write passes p on; without a WriteHeader first the status is 200.
func (rn *run) Write(p []byte) (int, error) {
	if rn.status == 0 {
		rn.status = http.StatusOK
	}
	return rn.ResponseWriter.Write(p)
}

// Flush sends any buffered data to the client, if the underlying
// ResponseWriter can.
func (rn *run) Flush() {
	if rn.status == 0 {
		rn.status = http.StatusOK
	}
	_ = http.NewResponseController(rn.ResponseWriter).Flush()
}

// Unwrap returns the underlying ResponseWriter, for [http.ResponseController].
func (rn *run) Unwrap() http.ResponseWriter { return rn.ResponseWriter }
