package dedupehttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/wait"
	"github.com/gatewaykit/dedupe/queue"
)

// DefaultMaxAttempts is how many attempts a queued message gets by default
// (see [WithMaxAttempts]).
const DefaultMaxAttempts = 3

// WithQueue makes an [Async] queue every message it accepts in q before it
// answers 202 Accepted, and serve them with [WithWorkers] workers that take
// them from q; see [Async] for what this changes. With a durable q
// ([queue.OpenSQLite], or the Redis and PostgreSQL queues of the redis and
// postgres modules) a crash of the process loses no accepted message. The
// Async does not own q: close q after [Async.Close]. [WithQueueSize] does not
// bound q.
func WithQueue(q queue.Queue) AsyncOption {
	return asyncOption(func(c *config) { c.queue, c.spill = q, false })
}

// WithOverflow gives an [Async] two tiers, as the ClawBridge gateway has:
// messages are kept in memory (as without [WithQueue]) while fewer than
// [WithWorkers] + [WithQueueSize] are waiting or running, and the ones past
// that depth, instead of being refused with 503, are pushed to q and served
// as [WithQueue] says. A crash loses the messages of the memory tier (at
// most that depth), not those of q. Each tier has [WithWorkers] workers.
// The Async does not own q: close q after [Async.Close].
func WithOverflow(q queue.Queue) AsyncOption {
	return asyncOption(func(c *config) { c.queue, c.spill = q, true })
}

// WithMaxAttempts sets how many attempts a message of the [queue.Queue] of
// [WithQueue] or [WithOverflow] gets (default [DefaultMaxAttempts]; n <= 0
// keeps it). An attempt counts when a worker takes the message, before the
// handler runs, so a worker that never comes back (killed, out of memory,
// os.Exit) uses one up; a take on which no handler ran is given back. A
// failure with attempts left puts the message back for 1 s, 2 s, 4 s… (at
// most the visibility timeout). A failure on the last attempt, or a message
// taken more than n times (a poison message that kills its worker), moves it
// to [queue.StateFailed] with the reason: counted in [QueueStats].Failed,
// logged at error level, reported to [WithDone]; [queue.Queue.Failed] lists
// these dead letters and [queue.Queue.Requeue] puts one back. The memory
// tier, which has no second attempt, does not read n.
func WithMaxAttempts(n int) AsyncOption {
	return asyncOption(func(c *config) {
		if n > 0 {
			c.maxAttempts = n
		}
	})
}

// WithHandlerTimeout bounds each run of a handler on a message of the
// [queue.Queue] of [WithQueue] or [WithOverflow]: when d has passed, the
// handler's context is cancelled with the cause [ErrHandlerTimeout], and a
// handler that then returns a failure (or nothing but the context's error)
// has failed that attempt (see [WithMaxAttempts]). By default, and for
// d <= 0, the bound is nine tenths of the queue's visibility timeout
// ([queue.Delivery].Visibility), so that a run ends before another worker
// could take the message even if renewing its visibility fails. Go cannot
// stop a goroutine: a handler that ignores its context keeps its worker
// until it returns, and its message stays processing meanwhile; one second
// past its deadline it is logged at error level. The memory tier does not
// read it.
func WithHandlerTimeout(d time.Duration) AsyncOption {
	return asyncOption(func(c *config) { c.handlerTimeout = max(d, 0) })
}

// handlerTimeoutFor returns the bound on a run of the handler on dl.
func (c *config) handlerTimeoutFor(dl queue.Delivery) time.Duration {
	if c.handlerTimeout > 0 {
		return c.handlerTimeout
	}
	return dl.Visibility - dl.Visibility/10
}

// accept queues the message of r, claimed by nobody yet, in a's queue, and
// answers 202; or answers a copy that is processed already, or still live in
// the queue, as [Middleware] does. It ends the request enter counted.
func (a *Async) accept(w http.ResponseWriter, r *http.Request, d *delivery) {
	defer a.wg.Done()
	ctx := r.Context()
	marked, err := a.d.Exists(ctx, d.key)
	if err == nil && marked {
		err = dedupe.ErrDuplicate
	}
	if err != nil {
		a.c.answer(w, r, d, a.next, err)
		return
	}
	data, _ := Body(r) // the buffer of prepare
	id, added, err := a.c.queue.Push(ctx, a.c.newMessage(r, d.key, data))
	switch {
	case errors.Is(err, queue.ErrFull):
		a.stats.full.Add(1)
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queue full, asked the platform to retry",
			slog.String("key", d.key.String()))
		a.c.unavailable(w, "queue full")
		return
	case err != nil:
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queue failed, asked the platform to retry",
			slog.String("key", d.key.String()), slog.Any("error", err))
		a.c.unavailable(w, "queue unavailable")
		return
	case !added: // a copy of a message still queued or processing
		a.c.answer(w, r, d, a.next, dedupe.ErrInFlight)
		return
	}
	d.verdict = VerdictNew
	w.Header().Set(HeaderQueueID, id)
	w.Header().Set(HeaderVerdict, "queued")
	w.WriteHeader(a.c.acceptedStatus)
}

// work takes messages from a's queue and processes them until Close.
func (a *Async) work() {
	defer a.qwg.Done()
	for failures := 0; ; {
		dl, err := a.c.queue.Take(a.taking)
		if err == nil {
			failures = 0
			a.process(dl)
			continue
		}
		if a.taking.Err() != nil || errors.Is(err, queue.ErrClosed) {
			return
		}
		failures++
		a.c.log(a.taking, slog.LevelWarn, "dedupe: dedupehttp: cannot take from the queue", slog.Any("error", err))
		if wait.Sleep(a.taking, min(100*time.Millisecond<<min(failures, 6), 5*time.Second)) != nil {
			return
		}
	}
}

// process runs the handler on one delivery under the Deduper and settles it.
func (a *Async) process(dl queue.Delivery) {
	ctx, cancel := messageContext(&dl.Message)
	defer cancel()
	defer context.AfterFunc(a.abandon, cancel)()
	r, err := messageRequest(&dl.Message, ctx)
	if err != nil { // cannot be served anywhere
		a.deadLetter(ctx, dl, err)
		return
	}
	if dl.Attempt > a.c.maxAttempts {
		a.exhausted(ctx, dl)
		return
	}
	stop := a.keepVisible(dl)
	var ran bool
	var herr error
	var took time.Duration
	err = a.d.Do(ctx, dl.Key, func(ctx context.Context) error {
		ran = true
		start := time.Now()
		herr = a.serveWithin(ctx, dl, r)
		took = time.Since(start)
		return herr
	})
	stop()
	if ran {
		a.stats.latency.Observe(QueueLatencyBuckets[:], took)
	}
	a.conclude(ctx, dl, ran, herr, err)
}

// serveWithin runs the handler on r, the request of dl, under the bound of
// [WithHandlerTimeout].
func (a *Async) serveWithin(ctx context.Context, dl queue.Delivery, r *http.Request) error {
	limit := a.c.handlerTimeoutFor(dl)
	hctx, cancel := context.WithTimeoutCause(ctx, limit, ErrHandlerTimeout)
	defer cancel()
	returned := make(chan struct{})
	defer close(returned)
	context.AfterFunc(hctx, func() { a.warnOverdue(hctx, dl, limit, returned) })
	err := a.serve(hctx, dl.Key, dl.ID, r)
	if err != nil && errors.Is(context.Cause(hctx), ErrHandlerTimeout) {
		err = fmt.Errorf("%w after %v: %w", ErrHandlerTimeout, limit, err)
	}
	return err
}

// overdueGrace is how long a handler may run past its deadline before
// warnOverdue logs it.
const overdueGrace = time.Second

// warnOverdue logs, once, a handler still running overdueGrace after its
// deadline (a handler that ignores its context, which Go cannot stop): its
// worker stays held, and its message processing, until it returns. It
// returns at once if hctx ended otherwise, and when returned is closed.
func (a *Async) warnOverdue(hctx context.Context, dl queue.Delivery, limit time.Duration, returned <-chan struct{}) {
	if !errors.Is(context.Cause(hctx), ErrHandlerTimeout) {
		return
	}
	t := time.NewTimer(overdueGrace)
	defer t.Stop()
	select {
	case <-returned:
	case <-t.C:
		a.c.log(hctx, slog.LevelError, "dedupe: dedupehttp: queued handler ignores its deadline and still runs; its worker is held until it returns",
			slog.String("key", dl.Key.String()), slog.String("queue_id", dl.ID), slog.Duration("deadline", limit))
	}
}

// exhausted settles a delivery taken once more than the attempts allow: its
// last attempt never finished, so its worker most likely died on it. A
// message found marked was processed by that worker after all.
func (a *Async) exhausted(ctx context.Context, dl queue.Delivery) {
	marked, err := a.d.Exists(ctx, dl.Key)
	switch {
	case err != nil: // try again later; this take does not count
		a.stats.retried.Add(1)
		a.settle(ctx, dl, queue.Change{State: queue.StateQueued, After: notRunDelay(dl), NotRun: true})
	case marked:
		a.conclude(ctx, dl, false, nil, dedupe.ErrDuplicate)
	default:
		a.deadLetter(ctx, dl, fmt.Errorf("%w: attempt %d of at most %d", ErrAttemptsExhausted, dl.Attempt, a.c.maxAttempts))
	}
}

// deadLetter settles dl as failed for good because of err, and reports it.
func (a *Async) deadLetter(ctx context.Context, dl queue.Delivery, err error) {
	a.stats.failed.Add(1)
	a.settle(ctx, dl, queue.Change{State: queue.StateFailed, Reason: err.Error()})
	a.finish(ctx, dl.Key, dl.ID, err)
}

// conclude settles a delivery after Do returned err; ran tells whether the
// handler ran, and herr is its outcome.
func (a *Async) conclude(ctx context.Context, dl queue.Delivery, ran bool, herr, err error) {
	attrs := []slog.Attr{slog.String("key", dl.Key.String()), slog.String("queue_id", dl.ID),
		slog.Int("attempt", dl.Attempt)}
	switch {
	case ran && herr == nil: // processed; err is a failed mark, if any
		a.stats.success.Add(1)
		a.settle(ctx, dl, queue.Change{State: queue.StateDone})
		a.finish(ctx, dl.Key, dl.ID, err)
	case errors.Is(err, dedupe.ErrDuplicate): // processed before, maybe by a dead worker
		a.stats.duplicate.Add(1)
		a.c.debug(ctx, "dedupe: dedupehttp: queued message processed already", attrs...)
		a.settle(ctx, dl, queue.Change{State: queue.StateDone})
		if a.c.done != nil {
			a.c.done(ctx, dl.Key, err)
		}
	case a.abandon.Err() != nil: // Close gave up: the handler was cancelled, or never ran
		a.stats.retried.Add(1)
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queued message put back at close", attrs...)
		a.settle(ctx, dl, queue.Change{State: queue.StateQueued, NotRun: !ran})
	case ran && errors.Is(herr, dedupe.ErrInFlight): // AnswerInFlight: its work is held elsewhere
		a.stats.retried.Add(1)
		a.c.debug(ctx, "dedupe: dedupehttp: queued handler answered in flight, put back", attrs...)
		a.settle(ctx, dl, queue.Change{State: queue.StateQueued, After: notRunDelay(dl), NotRun: true})
	case ran && dl.Attempt < a.c.maxAttempts:
		a.stats.retried.Add(1)
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queued handler failed, will retry",
			append(attrs, slog.Any("error", herr))...)
		a.settle(ctx, dl, queue.Change{State: queue.StateQueued, After: retryDelay(dl)})
	case ran:
		a.deadLetter(ctx, dl, herr)
	default: // in flight elsewhere (a dead worker's lease runs out), or the store failed
		a.stats.retried.Add(1)
		a.c.debug(ctx, "dedupe: dedupehttp: queued message not claimed, put back",
			append(attrs, slog.Any("error", err))...)
		a.settle(ctx, dl, queue.Change{State: queue.StateQueued, After: notRunDelay(dl), NotRun: true})
	}
}

// notRunDelay is how long a message on which no handler ran waits before
// its next take: half its visibility timeout. Such takes do not count in
// the attempts, so the delay cannot grow with them; this one spaces the
// takes of a message whose key a dead worker's lease still holds.
func notRunDelay(dl queue.Delivery) time.Duration { return dl.Visibility / 2 }

// retryDelay is how long a message waits before its next take: 1 s doubled
// at each attempt, at most the delivery's visibility timeout.
func retryDelay(dl queue.Delivery) time.Duration {
	return min(time.Second<<min(max(dl.Attempt-1, 0), 10), dl.Visibility)
}

// settleTimeout bounds an Update that settles a delivery.
const settleTimeout = 10 * time.Second

// settle moves dl on in the queue as ch says. If that fails the message
// becomes visible again after its timeout, and the next worker settles it.
func (a *Async) settle(ctx context.Context, dl queue.Delivery, ch queue.Change) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	err := a.c.queue.Update(uctx, dl, ch)
	attrs := []slog.Attr{slog.String("queue_id", dl.ID), slog.String("state", ch.State.String()), slog.Any("error", err)}
	switch {
	case err == nil:
	case errors.Is(err, queue.ErrStaleDelivery):
		a.c.debug(ctx, "dedupe: dedupehttp: queued message taken again by another worker", attrs...)
	default:
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: cannot update the queue; the message will be taken again after its visibility timeout", attrs...)
	}
}

// keepVisible renews the visibility timeout of dl every third of it until
// the returned func is called; that func waits for the renewing goroutine.
func (a *Async) keepVisible(dl queue.Delivery) (stop func()) {
	every := dl.Visibility / 3
	if every <= 0 {
		return func() {}
	}
	done, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), every)
			err := a.c.queue.Update(ctx, dl, queue.Change{State: queue.StateProcessing})
			cancel()
			if err != nil {
				a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: cannot renew a queued message's visibility timeout",
					slog.String("queue_id", dl.ID), slog.Any("error", err))
			}
			if errors.Is(err, queue.ErrStaleDelivery) {
				return
			}
		}
	}()
	return func() {
		close(done)
		<-exited
	}
}
