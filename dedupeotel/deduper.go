package dedupeotel

import (
	"context"
	"errors"

	"github.com/gatewaykit/dedupe"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Deduper is a [dedupe.Deduper] whose Do is a span: "dedupe.Do", with the
// attributes messaging.system (the key's channel), messaging.message.id
// (masked by [WithMask]), messaging.operation.type "process" and
// dedupe.verdict, the result of the Deduper's decision record: processed,
// duplicate, in_flight, failed (fn's error), abandoned (fn's error after its
// lease was lost) or store_error (the store failed the claim, or the mark
// after fn succeeded); a failure also records its error (masked by
// [WithMask]) with error.type and an error status.
// The store calls, fn's own spans and a wait for an in-flight copy are its
// children when the Deduper's store is a [Store]. It is safe for concurrent
// use.
type Deduper struct {
	d   *dedupe.Deduper
	cfg *config
}

// NewDeduper returns d with its Do traced. Build d over a [Store] to see the
// store calls and waits as children of the Do.
func NewDeduper(d *dedupe.Deduper, opts ...Option) *Deduper {
	return &Deduper{d: d, cfg: newConfig(opts)}
}

// Unwrap returns the Deduper d wraps, for its other methods.
func (d *Deduper) Unwrap() *dedupe.Deduper { return d.d }

// Do runs [dedupe.Deduper.Do] in a span, and returns what it returns.
func (d *Deduper) Do(ctx context.Context, key dedupe.Key, fn func(context.Context) error) error {
	attrs := append(d.cfg.keyAttrs(key), semconv.MessagingOperationTypeProcess)
	ctx, span := d.cfg.tracer.Start(ctx, "dedupe.Do", trace.WithAttributes(attrs...))
	ctx, cl := withCall(ctx)
	ran, failed, returned := false, false, false
	defer func() {
		if !returned { // fn panicked: Do released the claim and lets the panic go on
			cl.finish("failed")
			span.SetAttributes(VerdictKey.String("failed"))
			span.SetStatus(codes.Error, "panic")
		}
		span.End()
	}()
	err := d.d.Do(ctx, key, func(ctx context.Context) error {
		ran = true
		ferr := fn(ctx)
		failed = ferr != nil
		return ferr
	})
	returned = true
	v := verdict(err, ran, failed)
	cl.finish(v)
	span.SetAttributes(VerdictKey.String(v))
	if v != "processed" && v != "duplicate" && v != "in_flight" {
		d.cfg.recordError(span, key, err)
	}
	return err
}

// verdict returns the result of a Do that returned err, having run fn (ran)
// and fn having failed.
func verdict(err error, ran, failed bool) string {
	switch {
	case err == nil:
		return "processed"
	case errors.Is(err, dedupe.ErrDuplicate):
		return "duplicate"
	case errors.Is(err, dedupe.ErrInFlight):
		return "in_flight"
	case failed && errors.Is(err, dedupe.ErrNotOwner):
		return "abandoned"
	case failed:
		return "failed"
	}
	return "store_error" // the claim failed, or the mark after fn succeeded
}
