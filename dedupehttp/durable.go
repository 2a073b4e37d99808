package dedupehttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/wait"
	"github.com/gatewaykit/dedupe/queue"
)

// DefaultMaxAttempts is how many takes of a message may run its handler
// before a failure is final, by default (see [WithMaxAttempts]).
const DefaultMaxAttempts = 1

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

// WithMaxAttempts sets how many takes of a queued message may run a handler
// that fails (default [DefaultMaxAttempts]: a failure is final, as in
// memory). Before that the message is put back in its [queue.Queue] and retried
// after 1 s, 2 s, 4 s… (at most the queue's visibility timeout); a failure
// on a take whose [queue.Delivery].Attempt is n or more is final: the message is
// failed and reported to the func of [WithDone]. Attempt counts every take,
// including those after a worker died and those that found the message's key
// in flight elsewhere. n <= 0 keeps the default. The memory tier ignores it.
func WithMaxAttempts(n int) AsyncOption {
	return asyncOption(func(c *config) {
		if n > 0 {
			c.maxAttempts = n
		}
	})
}

// accept queues the message of r, claimed by nobody yet, in a's queue, and
// answers 202; or answers a copy that is processed already, or still live in
// the queue, as [Middleware] does. It ends the request enter counted.
func (a *Async) accept(w http.ResponseWriter, r *http.Request, d *delivery) {
	defer a.wg.Done()
	ctx := r.Context()
	marked, err := a.d.Store().Exists(ctx, d.key)
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
		a.c.log(ctx, slog.LevelError, "dedupe: dedupehttp: queued message unusable", slog.Any("error", err))
		a.stats.failed.Add(1)
		a.settle(ctx, dl, queue.StateFailed, 0)
		return
	}
	stop := a.keepVisible(dl)
	var ran bool
	var herr error
	var took time.Duration
	err = a.d.Do(ctx, dl.Key, func(ctx context.Context) error {
		ran = true
		start := time.Now()
		herr = a.serve(ctx, dl.Key, dl.ID, r)
		took = time.Since(start)
		return herr
	})
	stop()
	if ran {
		a.stats.latency.observe(took)
	}
	a.conclude(ctx, dl, ran, herr, err)
}

// conclude settles a delivery after Do returned err; ran tells whether the
// handler ran, and herr is its outcome.
func (a *Async) conclude(ctx context.Context, dl queue.Delivery, ran bool, herr, err error) {
	attrs := []slog.Attr{slog.String("key", dl.Key.String()), slog.String("queue_id", dl.ID),
		slog.Int("attempt", dl.Attempt)}
	switch {
	case ran && herr == nil: // processed; err is a failed mark, if any
		a.stats.success.Add(1)
		a.settle(ctx, dl, queue.StateDone, 0)
		a.finish(ctx, dl.Key, dl.ID, err)
	case errors.Is(err, dedupe.ErrDuplicate): // processed before, maybe by a dead worker
		a.stats.duplicate.Add(1)
		a.c.debug(ctx, "dedupe: dedupehttp: queued message processed already", attrs...)
		a.settle(ctx, dl, queue.StateDone, 0)
		if a.c.done != nil {
			a.c.done(ctx, dl.Key, err)
		}
	case a.abandon.Err() != nil: // Close gave up: the handler was cancelled, or never ran
		a.stats.retried.Add(1)
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queued message put back at close", attrs...)
		a.settle(ctx, dl, queue.StateQueued, 0)
	case ran && dl.Attempt < a.c.maxAttempts:
		a.stats.retried.Add(1)
		a.c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: queued handler failed, will retry",
			append(attrs, slog.Any("error", herr))...)
		a.settle(ctx, dl, queue.StateQueued, retryDelay(dl))
	case ran:
		a.stats.failed.Add(1)
		a.settle(ctx, dl, queue.StateFailed, 0)
		a.finish(ctx, dl.Key, dl.ID, herr)
	default: // in flight elsewhere (a dead worker's lease runs out), or the store failed
		a.stats.retried.Add(1)
		a.c.debug(ctx, "dedupe: dedupehttp: queued message not claimed, put back",
			append(attrs, slog.Any("error", err))...)
		a.settle(ctx, dl, queue.StateQueued, retryDelay(dl))
	}
}

// retryDelay is how long a message waits before its next take: 1 s doubled
// at each attempt, at most the delivery's visibility timeout.
func retryDelay(dl queue.Delivery) time.Duration {
	return min(time.Second<<min(max(dl.Attempt-1, 0), 10), dl.Visibility)
}

// settleTimeout bounds an Update that settles a delivery.
const settleTimeout = 10 * time.Second

// settle moves dl on to s in the queue. If that fails the message becomes
// visible again after its timeout, and the next worker settles it.
func (a *Async) settle(ctx context.Context, dl queue.Delivery, s queue.State, after time.Duration) {
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	err := a.c.queue.Update(uctx, dl, s, after)
	attrs := []slog.Attr{slog.String("queue_id", dl.ID), slog.String("state", s.String()), slog.Any("error", err)}
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
			err := a.c.queue.Update(ctx, dl, queue.StateProcessing, 0)
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
