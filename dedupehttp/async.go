package dedupehttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
)

// Defaults of the options of [NewAsync].
const (
	// DefaultWorkers is how many queued requests an [Async] serves at once by
	// default (see [WithWorkers]).
	DefaultWorkers = 8
	// DefaultQueueSize is how many accepted requests wait for a worker of an
	// [Async] by default (see [WithQueueSize]).
	DefaultQueueSize = 256
)

// WithWorkers sets how many queued requests an [Async] serves at once
// (default [DefaultWorkers]). n <= 0 keeps the default.
func WithWorkers(n int) AsyncOption {
	return asyncOption(func(c *config) {
		if n > 0 {
			c.workers = n
		}
	})
}

// WithQueueSize sets how many accepted requests wait for a worker of an
// [Async]'s memory tier (default [DefaultQueueSize]); a request that finds
// the queue full is answered 503 with Retry-After, or pushed to the queue of
// [WithOverflow]. n <= 0 means no waiting room: only as many requests as
// there are workers are accepted at a time. [WithQueue], which has no memory
// tier, does not read it.
func WithQueueSize(n int) AsyncOption {
	return asyncOption(func(c *config) { c.queueSize = max(n, 0) })
}

// WithAcceptedStatus sets the status with which an [Async] answers a request
// it queued: by default 202 Accepted; use 200 for a platform that takes
// nothing else as a success. 0 keeps the default.
func WithAcceptedStatus(code int) AsyncOption {
	return asyncOption(func(c *config) {
		if code != 0 {
			c.acceptedStatus = code
		}
	})
}

// WithDone sets a func that an [Async] calls once for each queued request
// after it ended and its message was marked or released, on the worker's
// goroutine and before [Async.Close] returns. err is nil if the handler
// succeeded; otherwise it wraps [ErrHandlerFailed], [ErrAbandoned] or a store
// error. ctx is the request's context, detached from the request's
// cancellation: [QueueID] and [dedupe.TraceID] read it.
//
// For a message of the [queue.Queue] of [WithQueue] or [WithOverflow], served in
// whichever process took it, it is called when that process settles the
// message: done (err nil, or the error of a mark that failed after the
// handler succeeded), found processed already (err wraps
// [dedupe.ErrDuplicate]: processed under another queue id, or by a worker
// that died before it settled the message), or failed for good (err wraps
// [ErrHandlerFailed]). A message put back in the queue (to be retried, or
// at Close) has not ended, and is not reported.
func WithDone(done func(ctx context.Context, key dedupe.Key, err error)) Option {
	return func(c *config) { c.done = done }
}

// Async is an [http.Handler] that deduplicates webhook deliveries like
// [Middleware] but answers each new message at once and processes it in the
// background, for handlers slower than the platform's timeout (an AI turn, for
// example). For each request it:
//   - reads the body, authenticates it (given [WithVerify], or an extractor
//     made by [FromPreset] of a preset with a secret) and extracts the
//     key as [Middleware] does; a request the extract-error policy lets
//     through is served at once, synchronously, so that the handler can
//     answer a platform handshake;
//   - claims the key synchronously: a duplicate and a copy in flight are
//     answered as by [Middleware] and never reach the handler, and a store
//     failure is answered 503 with Retry-After;
//   - queues the claimed message and answers 202 Accepted (see
//     [WithAcceptedStatus]) with its queue id in the [HeaderQueueID] header;
//   - if the queue is full, releases the claim and answers 503 with
//     Retry-After, so that the platform's retry is processed: nothing is
//     dropped silently. The Deduper counts the release in [dedupe.Stats].Failed.
//
// At most [WithWorkers] handlers run at once. Each gets a clone of the
// request with the buffered body, and a context that keeps the request's
// values but is not cancelled when the response has been sent; [QueueID] reads
// the queue id from it. The claim's lease is renewed while the message waits
// and while it is processed. When the handler has finished, the message is
// marked, or released if the handler answered with a failure status or
// panicked (the panic is recovered and logged with its stack). The platform
// was answered already and will not redeliver a message whose handler failed
// after it was accepted: such failures are logged at error level and reported
// to the func set by [WithDone].
//
// # Durable acceptance
//
// Without [WithQueue] the accepted messages live in the process's memory: a
// crash loses every message answered 202 and not yet processed, and the
// platform will not redeliver them. With WithQueue(q) and a durable q
// ([queue.OpenSQLite], or the Redis Streams and PostgreSQL queues of the
// redis and postgres modules) a request is served so:
//   - the key is looked up ([dedupe.Deduper.Exists], which honours [dedupe.WithFallback]): a message processed
//     already is answered 200 as a duplicate; a store failure 503;
//   - the message (the body the handler reads, the headers of
//     [WithQueuedHeaders], the method, target and host, the key and the
//     trace id) is pushed to q, and the 202 with its queue id is sent only
//     when the push returned, so an accepted message is in q whatever
//     happens next. A copy of a message still live in q is not pushed
//     again, and is answered as in flight (503 with Retry-After); a failed
//     push, or a q at its depth bound ([queue.ErrFull]), is answered 503 with
//     Retry-After, so the platform retries;
//   - nothing is claimed yet: [WithWorkers] workers take the messages from q
//     (in this process or any other on q), and each runs the handler under
//     [dedupe.Deduper.Do]. The claim is what makes the processing happen
//     once, whatever q hands out twice: a message whose key is marked is
//     settled done without the handler; one whose key another worker holds
//     (or a dead worker, until its lease runs out: see [dedupe.WithLease])
//     is put back and tried again later.
//
// A crash between the push and the 202 leaves the message in q: it is
// processed, and the platform's retry finds it in flight or processed. A
// worker that dies mid-handler leaves its message to another worker once the
// visibility timeout and the claim's lease have run out: the handler's side
// effects may begin twice, its completion (the mark) happens once; see
// [WithMaxAttempts] for failures. [WithOverflow] combines the memory tier and
// the queue; [Async.StatusHandler], [Async.QueueStats] and [Async.Depth]
// report on them.
//
// Its goroutines (one per request of the memory tier, and [WithWorkers]
// workers with a queue) end by [Async.Close]. It is safe for concurrent use.
type Async struct {
	d       *dedupe.Deduper
	extract Extractor
	next    http.Handler
	c       *config

	slots   chan struct{} // one per accepted request not yet done
	workers chan struct{} // one per request being served

	abandon    context.Context // cancelled when Close gives up waiting
	abandonNow context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // requests, and the memory tier's goroutines

	taking     context.Context // cancelled by Close: the workers of the queue stop taking
	stopTaking context.CancelFunc
	qwg        sync.WaitGroup // the workers of the queue

	states statusTable // of the memory tier's messages
	stats  queueCounters

	events *platform.Preset // of NewAsyncEvents; nil for NewAsync
}

// NewAsync returns an [Async] that deduplicates with d, keyed by extract, and
// processes new messages with h. Give it [WithVerify] with the platform's
// preset to authenticate deliveries; without it NewAsync logs a warning that
// the endpoint is unauthenticated. opts are the [Option] values of
// [Middleware] and the [AsyncOption] values of the queue and its workers:
//
//	a := dedupehttp.NewAsync(d, dedupehttp.FromPreset(platform.Slack), h,
//		dedupehttp.WithWorkers(4), dedupehttp.WithQueueSize(64))
//
// d, extract and h must not be nil. Close the Async with [Async.Close] after
// the server stopped sending it requests (see [http.Server.Shutdown]).
func NewAsync(d *dedupe.Deduper, extract Extractor, h http.Handler, opts ...AsyncOption) *Async {
	c := newAsyncConfig(append([]AsyncOption{verifyPresetOf(extract)}, opts...))
	a := &Async{
		d:       d,
		extract: extract,
		next:    h,
		c:       c,
		slots:   make(chan struct{}, c.workers+c.queueSize),
		workers: make(chan struct{}, c.workers),
	}
	a.abandon, a.abandonNow = context.WithCancel(context.Background())
	a.taking, a.stopTaking = context.WithCancel(a.abandon)
	if c.queue != nil {
		a.qwg.Add(c.workers)
		for range c.workers {
			go a.work()
		}
	}
	return a
}

type queueIDKey struct{}

// QueueID returns the id [Async] gave the request whose handler runs with
// ctx, as sent in the [HeaderQueueID] header, or "".
func QueueID(ctx context.Context) string {
	id, _ := ctx.Value(queueIDKey{}).(string)
	return id
}

// job is one accepted request.
type job struct {
	key    dedupe.Key
	id     string
	reqCtx context.Context // the request's own context
	ctx    context.Context // the request's values; cancelled by the request until detached, and by abandon
	cancel context.CancelFunc
	detach func() bool   // stops the request's cancellation from reaching ctx
	req    *http.Request // clone with ctx and the buffered body
	queued chan error    // nil once queued, or Do's error; sent once
	data   []byte
}

// ServeHTTP claims the message of r and queues it, or answers it as a
// duplicate, a copy in flight, or with 503. See [Async]; an Async of
// [NewAsyncEvents] accepts a batch as that says.
func (a *Async) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.events != nil {
		if !a.enter() {
			a.c.unavailable(w, "shutting down")
			return
		}
		a.acceptEvents(w, r)
		return
	}
	observe := observerOf(r.Context())
	r, d, next := a.c.prepare(w, r, a.extract)
	if observe != nil {
		defer func() { observe(d.outcome()) }()
	}
	switch next {
	case nextDone:
		return
	case nextPass:
		a.next.ServeHTTP(w, r)
		return
	}
	if !a.enter() {
		a.c.unavailable(w, "shutting down")
		return
	}
	if a.c.queue != nil && !a.c.spill {
		a.accept(w, r, d)
		return
	}
	select {
	case a.slots <- struct{}{}:
	default:
		if a.c.queue != nil {
			a.accept(w, r, d)
			return
		}
		a.wg.Done()
		a.full(w, r, d)
		return
	}
	d.verdict = VerdictNew // before the worker may read it
	j := a.newJob(r, d.key)
	go a.run(j)
	if err := <-j.queued; err != nil {
		a.c.answer(w, r, d, a.next, err)
		return
	}
	w.Header().Set(HeaderQueueID, j.id)
	w.Header().Set(HeaderVerdict, "queued")
	w.WriteHeader(a.c.acceptedStatus)
}

// enter registers a request that will start a goroutine, unless a is closed.
func (a *Async) enter() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false
	}
	a.wg.Add(1)
	return true
}

// full answers a request that found the queue full. It claims the key first,
// so that duplicates are still answered as such, and releases the claim.
func (a *Async) full(w http.ResponseWriter, r *http.Request, d *delivery) {
	err := a.d.Do(r.Context(), d.key, func(context.Context) error { return queue.ErrFull })
	if !errors.Is(err, queue.ErrFull) {
		a.c.answer(w, r, d, a.next, err)
		return
	}
	a.stats.full.Add(1)
	a.c.log(r.Context(), slog.LevelWarn, "dedupe: dedupehttp: queue full, asked the platform to retry",
		slog.String("key", d.key.String()))
	a.c.unavailable(w, "queue full")
}

func (a *Async) newJob(r *http.Request, key dedupe.Key) *job {
	j := &job{key: key, reqCtx: r.Context(), queued: make(chan error, 1)}
	j.id = newMessageID()
	ctx := context.WithValue(context.WithoutCancel(r.Context()), queueIDKey{}, j.id)
	j.ctx, j.cancel = context.WithCancel(ctx)
	j.detach = context.AfterFunc(r.Context(), j.cancel)
	j.data, _ = Body(r) // the buffer of prepare
	j.req = r.Clone(j.ctx)
	j.req.Body = newBody(j.data)
	return j
}

// run claims, queues and processes j. It owns j.
func (a *Async) run(j *job) {
	defer a.wg.Done()
	defer j.cancel()
	queued := false
	err := func() error {
		stop := context.AfterFunc(a.abandon, j.cancel)
		defer func() {
			stop()
			<-a.slots // free before Done is called
		}()
		return a.d.Do(j.ctx, j.key, func(ctx context.Context) error {
			if !j.detach() { // the request was cancelled before it was queued
				return context.Cause(j.reqCtx)
			}
			queued = true
			a.states.set(j.id, j.key, queue.StateQueued)
			j.queued <- nil
			select {
			case a.workers <- struct{}{}:
			case <-a.abandon.Done():
				return ErrAbandoned
			}
			defer func() { <-a.workers }()
			if a.abandon.Err() != nil {
				return ErrAbandoned
			}
			a.states.set(j.id, j.key, queue.StateProcessing)
			start := time.Now()
			defer func() { a.stats.latency.Observe(QueueLatencyBuckets[:], time.Since(start)) }()
			return a.serve(ctx, j.key, j.id, j.req)
		})
	}()
	if !queued {
		j.queued <- err
		return
	}
	if err == nil {
		a.stats.success.Add(1)
		a.states.set(j.id, j.key, queue.StateDone)
	} else {
		a.stats.failed.Add(1)
		a.states.set(j.id, j.key, queue.StateFailed)
	}
	a.finish(j.ctx, j.key, j.id, err)
}

// serve runs the handler on r, the request of the message key queued as id,
// recovering a panic.
func (a *Async) serve(ctx context.Context, key dedupe.Key, id string, r *http.Request) (err error) {
	w := &discardWriter{header: make(http.Header)}
	defer func() {
		if p := recover(); p != nil {
			a.c.log(ctx, slog.LevelError, "dedupe: dedupehttp: queued handler panicked",
				slog.String("key", key.String()), slog.String("queue_id", id),
				slog.Any("panic", p), slog.String("stack", string(debug.Stack())))
			err = fmt.Errorf("%w: panic: %v", ErrHandlerFailed, p)
		}
	}()
	if ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	a.next.ServeHTTP(w, r)
	if w.inFlight {
		return errAnsweredInFlight
	}
	if w.status == 0 {
		if cause := context.Cause(ctx); errors.Is(cause, ErrHandlerTimeout) { // cut off, said nothing
			return fmt.Errorf("%w: %w", ErrHandlerFailed, cause)
		}
		w.status = http.StatusOK
	}
	if a.c.failed(w.status) {
		return fmt.Errorf("%w: status %d", ErrHandlerFailed, w.status)
	}
	return nil
}

// finish reports the end of the request of the message key queued as id.
func (a *Async) finish(ctx context.Context, key dedupe.Key, id string, err error) {
	attrs := []slog.Attr{slog.String("key", key.String()), slog.String("queue_id", id)}
	switch {
	case err == nil:
		a.c.debug(ctx, "dedupe: dedupehttp: queued request processed", attrs...)
	case errors.Is(err, ErrAbandoned):
		a.c.log(ctx, slog.LevelError, "dedupe: dedupehttp: queued request abandoned at close; the platform will not redeliver it",
			attrs...)
	default:
		a.c.log(ctx, slog.LevelError, "dedupe: dedupehttp: queued request failed after it was accepted; the platform will not redeliver it",
			append(attrs, slog.Any("error", err))...)
	}
	if a.c.done != nil {
		a.c.done(ctx, key, err)
	}
}

// Stats returns a snapshot of the counters of a's middleware. It is safe to
// call concurrently with ServeHTTP.
func (a *Async) Stats() Stats { return a.c.stats.snapshot() }

// Close stops accepting requests (they are answered 503 with Retry-After) and
// waits until every queued request has been processed and every goroutine of
// a has ended. If ctx is done first, Close abandons the requests still waiting
// for a worker, releasing their claims, and cancels the context of the
// handlers running; it still waits for those handlers to return, then returns
// ctx's error. Abandoned requests were answered already, so the platform will
// not redeliver them: each is logged at error level and reported to
// the func set by [WithDone] with [ErrAbandoned].
//
// With the [queue.Queue] of [WithQueue] or [WithOverflow], the workers stop taking
// once the requests in progress were answered, and Close waits for the
// handlers they run. A handler whose context Close cancels leaves its
// message in the queue, put back as queued, for the next process: nothing is
// abandoned. Close does not close the queue; close it after Close.
//
// Close may be called more than once; each call waits as the first.
func (a *Async) Close(ctx context.Context) error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()

	done := make(chan struct{})
	go func() { // ends when every request goroutine and worker has
		a.wg.Wait()
		a.stopTaking()
		a.qwg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		a.abandonNow()
		<-done
		return ctx.Err()
	}
}

// discardWriter is the ResponseWriter of a queued request's handler: its
// answer goes nowhere, but its status decides between mark and release.
type discardWriter struct {
	header   http.Header
	status   int
	inFlight bool // the handler called AnswerInFlight
}

// Header returns the header map, which nobody reads.
func (w *discardWriter) Header() http.Header { return w.header }

// WriteHeader records the first final status.
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 {
		w.status = code
	}
}

// Write discards p; without a WriteHeader first the status is 200.
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return len(p), nil
}

// Flush does nothing: there is no client.
func (w *discardWriter) Flush() {}
