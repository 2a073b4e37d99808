package dedupehttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Headers set on the answers that the middleware gives itself, without the
// handler.
const (
	// HeaderVerdict tells why the middleware answered: "unauthenticated" (a
	// 401: the delivery failed the preset's authentication), "duplicate",
	// "replayed" (a duplicate given the first answer: [WithReplay]),
	// "in_flight" (a 503, unless [WithInFlight] says otherwise), "failed"
	// (a 500: an event of [Events] failed), "queued"
	// (accepted by [Async]), "protocol" (a protocol request the middleware
	// answered itself: QQ's callback URL validation), "undeduplicated" (a
	// 400 under [WithRefuseUndeduplicated]) or "unavailable" (a 503: the
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
	// ErrHandlerTimeout is the cause with which the context of a queued
	// message's handler is cancelled when [WithHandlerTimeout] has passed; a
	// handler that then failed reports an error wrapping it and
	// [ErrHandlerFailed].
	ErrHandlerTimeout = errors.New("dedupe: dedupehttp: handler timed out")
	// ErrAttemptsExhausted reports a queued message taken once more than
	// [WithMaxAttempts] allows: its last attempt never finished (its worker
	// died on it), so it was failed without running the handler again.
	ErrAttemptsExhausted = errors.New("dedupe: dedupehttp: attempts exhausted, the last one never finished")
	// ErrAbandoned reports a request queued by [Async] that [Async.Close] gave
	// up on before it was processed. Its claim was released.
	ErrAbandoned = errors.New("dedupe: dedupehttp: abandoned at close")
)

// Middleware returns middleware that deduplicates webhook deliveries with d,
// keyed by extract. [New] is the same for a platform preset, with the
// preset's authentication, TTL and acknowledgement budget; Middleware is for
// custom extractors. For each request it:
//   - reads the body once, up to [WithMaxBodySize] (413 beyond); the
//     extractor and then the handler each read all of it;
//   - authenticates it first, given [WithVerify] or an extractor made by
//     [FromPreset] of a preset with a secret: a forgery gets 401 and touches
//     nothing. Otherwise it warns, when built, that nothing is authenticated;
//   - runs the handler inside [dedupe.Deduper.Do] with the request's context,
//     whose cancellation and values the store calls see; the handler learns
//     the key and the verdict from [KeyFrom];
//   - answers a duplicate with 200 OK ([WithDuplicate]; or the first answer,
//     [WithReplay]) and a copy in flight, once d's wait for the first
//     ([dedupe.WithWait]) is over, with 503 and Retry-After ([WithInFlight]);
//     neither reaches the handler;
//   - marks the message processed when the handler answered 2xx, and releases
//     its claim when it answered another status ([WithFailureStatus]) or
//     panicked before answering, so that the platform's retry is processed
//     (the panic goes on to the server);
//   - marks it too when the handler panics after writing a 2xx status: the
//     platform got its answer. The panic is recovered, logged with its stack
//     and counted ([Stats].PanicsAfterSuccess); [http.ErrAbortHandler] still
//     aborts the response, after the mark;
//   - answers 503 with Retry-After when the store fails, so that the platform
//     retries (the Deduper fails closed, unless given [dedupe.WithFallback]);
//   - applies [WithExtractError] when extract fails: by default, requests
//     without a message id pass to the handler undeduplicated (counted and
//     logged at warn level, unless protocol requests; see
//     [WithRefuseUndeduplicated]) and malformed ones get 400.
//
// The handler runs on the request's goroutine, so the platform waits for it;
// see [Async] for handlers slower than the platform's timeout. The
// ResponseWriter the handler gets implements [http.Flusher] and unwraps for
// [http.ResponseController]. d and extract must not be nil.
func Middleware(d *dedupe.Deduper, extract Extractor, opts ...Option) func(http.Handler) http.Handler {
	c := newConfig(append([]Option{verifyPresetOf(extract)}, opts...))
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
	observe := observerOf(r.Context())
	r, d, next := h.c.prepare(w, r, h.extract)
	if observe != nil {
		defer func() { observe(d.outcome()) }()
	}
	switch next {
	case nextDone:
		return
	case nextPass:
		h.next.ServeHTTP(w, r)
		return
	}
	run := &run{ResponseWriter: w, h: h, r: r, d: d}
	defer run.failedByPanic()
	var (
		kept []byte
		err  error
	)
	if h.c.replays() {
		kept, err = h.d.DoResult(r.Context(), d.key, run.serveKept)
	} else {
		err = h.d.Do(r.Context(), d.key, run.serve)
	}
	run.decided = true
	h.c.decided(r.Context(), d, err, run.ran, run.status)
	if !run.ran {
		if kept != nil && errors.Is(err, dedupe.ErrDuplicate) && h.c.replayTo(w, r, d, kept) {
			return
		}
		h.c.answer(w, r, d, h.next, err)
		return
	}
	if run.panicked != nil {
		h.panickedAfterSuccess(r, run, err)
	}
}

// failedByPanic logs a handler that panicked before answering with a
// success status: the panic goes on to the server, and Do released the
// claim.
func (rn *run) failedByPanic() {
	if rn.ran && !rn.decided {
		rn.h.c.handlerFailed(rn.r.Context(), rn.d, rn.status)
	}
}

// panickedAfterSuccess reports a handler that panicked after answering with
// a success status: its message was marked (err is the mark's failure, if
// any), since the platform got the answer. A panic with
// [http.ErrAbortHandler] goes on, to abort the response as it asks.
func (h *handler) panickedAfterSuccess(r *http.Request, rn *run, err error) {
	h.c.stats.panicsAfterSuccess.Add(1)
	h.c.log(r.Context(), slog.LevelError, "dedupe: dedupehttp: handler panicked after answering with a success status; the message is marked, since the platform got the answer",
		slog.String("key", rn.d.key.String()), slog.Int("status", rn.status), slog.Any("mark_error", err),
		slog.Any("panic", rn.panicked), slog.String("stack", string(rn.stack)))
	if rn.panicked == http.ErrAbortHandler { // net/http compares it so too
		panic(http.ErrAbortHandler)
	}
}

// run serves one request under a claim, and records the status the handler
// answers with. The handler gets it as its ResponseWriter.
type run struct {
	http.ResponseWriter
	h       *handler
	r       *http.Request
	d       *delivery
	status  int
	ran     bool
	decided bool // Do returned: a panic of the handler did not go through it
	// inFlight: the handler called AnswerInFlight.
	inFlight bool

	// panicked and stack are the panic of a handler that had answered with a
	// success status, recovered so that the message is marked.
	panicked any
	stack    []byte
}

func (rn *run) serve(ctx context.Context) error {
	rn.ran = true
	rn.d.verdict = VerdictNew
	rn.d.result, rn.d.err = resultFailed, errPanicked // unless the handler returns
	r := rn.r
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	defer rn.recoverAfterSuccess()
	rn.h.next.ServeHTTP(rn, r)
	if rn.inFlight {
		return errAnsweredInFlight
	}
	if rn.status == 0 {
		rn.status = http.StatusOK
	}
	if rn.h.c.failed(rn.status) {
		return fmt.Errorf("%w: status %d", ErrHandlerFailed, rn.status)
	}
	return nil
}

// recoverAfterSuccess recovers a panic of the handler if it had answered
// with a success status already, so that serve returns nil and the message
// is marked. Before that, the panic goes on untouched and Do releases the
// claim.
func (rn *run) recoverAfterSuccess() {
	if rn.status == 0 || rn.h.c.failed(rn.status) {
		return
	}
	if p := recover(); p != nil {
		rn.panicked, rn.stack = p, debug.Stack()
	}
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
