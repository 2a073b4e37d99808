package dedupehttp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gatewaykit/dedupe"
)

// An Outcome is how the middleware settled one request, as the func given
// to [ContextWithObserver] learns it: what a tracing wrapper outside the
// middleware (dedupeotel.Handler) needs to name the message on the
// request's span and give it the verdict of its decision record.
type Outcome struct {
	// Key is the message's key; zero for a request without one.
	Key dedupe.Key
	// Verdict is what the middleware decided, as [KeyFrom] tells the
	// handler; "" for a request refused before it was keyed
	// ([HeaderVerdict] says why).
	Verdict Verdict
	// Result is the result of the [dedupe.Deduper]'s decision record for
	// the request (see package dedupelog): processed, duplicate, in_flight,
	// failed, store_error or abandoned; "" when the Deduper decided nothing
	// (a request refused or served without deduplication), and from
	// [Async], whose worker runs the handler after the answer.
	Result string
	// Err is the error behind a Result of failed, store_error or abandoned:
	// for failed, it wraps [ErrHandlerFailed] and tells the handler's status.
	Err error
}

type observerKey struct{}

// ContextWithObserver returns ctx carrying observe, which [New],
// [Middleware] and [Async] call, once for each request served with that
// context ([Events]: once for each event), with its [Outcome] when they are
// done with it (also when the handler panicked), on the request's
// goroutine, before ServeHTTP returns.
func ContextWithObserver(ctx context.Context, observe func(Outcome)) context.Context {
	return context.WithValue(ctx, observerKey{}, observe)
}

// observerOf returns the func of ContextWithObserver ctx carries, or nil.
func observerOf(ctx context.Context) func(Outcome) {
	f, _ := ctx.Value(observerKey{}).(func(Outcome))
	return f
}

// outcome returns the Outcome of d, which is nil for a request refused
// before it was keyed.
func (d *delivery) outcome() Outcome {
	if d == nil {
		return Outcome{}
	}
	return Outcome{Key: d.key, Verdict: d.verdict, Result: d.result, Err: d.err}
}

// Results of the Deduper's decision records (package dedupe's).
const (
	resultProcessed  = "processed"
	resultDuplicate  = "duplicate"
	resultInFlight   = "in_flight"
	resultFailed     = "failed"
	resultStoreError = "store_error"
	resultAbandoned  = "abandoned"
)

// errPanicked is the error of a handler that panicked before answering with
// a success status.
var errPanicked = fmt.Errorf("%w: panicked", ErrHandlerFailed)

// decided records on d what Do decided: err is what it returned, having run
// the handler or not. A handler that failed is logged with its status.
func (c *config) decided(ctx context.Context, d *delivery, err error, ran bool, status int) {
	d.result, d.err = resultOf(err, ran)
	if d.result == resultFailed || d.result == resultAbandoned {
		c.handlerFailed(ctx, d, status)
	}
}

// resultOf returns the result of the decision record of a Do that returned
// err, having run the handler or not, and the error behind it; "" for an
// invalid key, which has no record.
func resultOf(err error, ran bool) (string, error) {
	switch {
	case err == nil:
		return resultProcessed, nil
	case errors.Is(err, dedupe.ErrDuplicate):
		return resultDuplicate, nil
	case errors.Is(err, dedupe.ErrInFlight):
		return resultInFlight, nil
	case !ran && errors.Is(err, dedupe.ErrInvalidKey):
		return "", nil
	case ran && errors.Is(err, ErrHandlerFailed) && errors.Is(err, dedupe.ErrNotOwner):
		return resultAbandoned, err
	case ran && errors.Is(err, ErrHandlerFailed):
		return resultFailed, err
	}
	return resultStoreError, err // the claim failed, or the mark after the handler succeeded
}

// handlerFailed logs a delivery whose handler failed: its claim was
// released, so the platform's retry is processed. status is what the
// handler answered, 0 if it panicked first.
func (c *config) handlerFailed(ctx context.Context, d *delivery, status int) {
	c.log(ctx, slog.LevelWarn, "dedupe: dedupehttp: handler failed; its claim was released, so that the platform's retry is processed",
		slog.String("key", d.key.String()), slog.Int("status", status), slog.Any("error", d.err))
}
