package dedupeotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// DoEach runs [dedupe.Deduper.DoEach] in a span, and returns what it
// returns. The span, "dedupe.DoEach", has the attributes
// messaging.batch.message_count (len(keys)), messaging.operation.type
// "process", messaging.system when every key has the same channel, and the
// number of keys of each verdict: [ProcessedCountKey], [DuplicateCountKey],
// [InFlightCountKey] and [FailedCountKey] (every other error: fn's, a
// store's, an invalid key's, a key not run). A batch with a failed key has
// an error status that counts them, and records the first failure's error
// (masked by [WithMask]) with error.type (the failures' common type, or
// _OTHER).
//
// Each key whose fn ran has a child span, "dedupe.process", the work of that
// message: it holds fn's own spans, starts when fn starts and ends when fn
// returns, and has the attributes of a Do's span (messaging.system,
// messaging.message.id masked by [WithMask], messaging.operation.type,
// dedupe.verdict: processed once its mark is written, failed, abandoned or
// store_error). The spans are ended when DoEach returns, once the marks are
// written and the verdicts known, with the time fn returned. A key whose fn
// did not run (a duplicate, a key in flight elsewhere, an invalid key, one
// whose claim failed) has no span of its own: it is counted on the batch's
// span. The batch's store calls ("dedupe.ClaimEach", "dedupe.MarkEach", ...)
// are children of the batch's span when the Deduper's store is a [Store].
//
// If fn panics, its key's span ends with the verdict failed and an error
// status, as Do's does; the batch's span ends with an error status
// "panic" and without counts, and the spans of the keys whose fn had
// returned end without a verdict, since DoEach does not return theirs.
func (d *Deduper) DoEach(ctx context.Context, keys []dedupe.Key, fn func(ctx context.Context, i int) error) []error {
	_, errs := d.doEach(ctx, keys, func(ctx context.Context, i int) ([]byte, error) { return nil, fn(ctx, i) },
		func(ctx context.Context, fn func(context.Context, int) ([]byte, error)) ([][]byte, []error) {
			return nil, d.d.DoEach(ctx, keys, func(ctx context.Context, i int) error {
				_, err := fn(ctx, i)
				return err
			})
		})
	return errs
}

// DoEachResult runs [dedupe.Deduper.DoEachResult] in spans, as [Deduper.DoEach]
// does, and returns what it returns.
func (d *Deduper) DoEachResult(ctx context.Context, keys []dedupe.Key, fn func(ctx context.Context, i int) ([]byte, error)) ([][]byte, []error) {
	return d.doEach(ctx, keys, fn,
		func(ctx context.Context, fn func(context.Context, int) ([]byte, error)) ([][]byte, []error) {
			return d.d.DoEachResult(ctx, keys, fn)
		})
}

// doEach is DoEach and DoEachResult: run calls the Deduper's batch method
// with ctx, carrying the batch's span, and fn wrapped in its key's span.
func (d *Deduper) doEach(ctx context.Context, keys []dedupe.Key, fn func(context.Context, int) ([]byte, error),
	run func(context.Context, func(context.Context, int) ([]byte, error)) ([][]byte, []error)) ([][]byte, []error) {
	attrs := []attribute.KeyValue{semconv.MessagingBatchMessageCount(len(keys)), semconv.MessagingOperationTypeProcess}
	if ch, ok := oneChannel(len(keys), func(i int) dedupe.Key { return keys[i] }); ok {
		attrs = append(attrs, semconv.MessagingSystemKey.String(ch))
	}
	ctx, span := d.cfg.tracer.Start(ctx, "dedupe.DoEach", trace.WithAttributes(attrs...))
	b := &eachSpans{cfg: d.cfg, keys: keys, spans: make([]trace.Span, len(keys)),
		ended: make([]time.Time, len(keys)), failed: make([]bool, len(keys))}
	returned := false
	defer func() {
		if !returned { // a fn panicked: DoEach settled the batch and lets the panic go on
			b.endAll(nil)
			span.SetStatus(codes.Error, "panic")
			span.End()
		}
	}()
	results, errs := run(ctx, func(ctx context.Context, i int) ([]byte, error) { return b.process(ctx, i, fn) })
	returned = true
	b.endAll(errs)
	d.countVerdicts(span, keys, errs)
	span.End()
	return results, errs
}

// countVerdicts sets the counts of the verdicts of errs on span, and its
// error status if a key failed.
func (d *Deduper) countVerdicts(span trace.Span, keys []dedupe.Key, errs []error) {
	var processed, duplicate, inFlight int
	var failed []int
	for i, err := range errs {
		switch {
		case err == nil:
			processed++
		case errors.Is(err, dedupe.ErrDuplicate):
			duplicate++
		case errors.Is(err, dedupe.ErrInFlight):
			inFlight++
		default:
			failed = append(failed, i)
		}
	}
	span.SetAttributes(ProcessedCountKey.Int(processed), DuplicateCountKey.Int(duplicate),
		InFlightCountKey.Int(inFlight), FailedCountKey.Int(len(failed)))
	d.cfg.recordEachErrors(span, "messages", len(errs), failed, errs, func(i int) dedupe.Key {
		if i < len(keys) {
			return keys[i]
		}
		return dedupe.Key{}
	})
}

// eachSpans are the process spans of one DoEach, by the key's index: set by
// the goroutine that runs the key's fn, read once DoEach returned (or
// panicked), when every fn has returned.
type eachSpans struct {
	cfg    *config
	keys   []dedupe.Key
	spans  []trace.Span // the process span of each key whose fn ran; nil once ended
	ended  []time.Time  // when its fn returned
	failed []bool       // whether its fn returned an error
}

// process runs fn for key i in the key's span.
func (b *eachSpans) process(ctx context.Context, i int, fn func(context.Context, int) ([]byte, error)) ([]byte, error) {
	attrs := append(b.cfg.keyAttrs(b.keys[i]), semconv.MessagingOperationTypeProcess)
	ctx, span := b.cfg.tracer.Start(ctx, "dedupe.process", trace.WithAttributes(attrs...))
	b.spans[i] = span
	returned := false
	defer func() {
		b.ended[i] = time.Now()
		if !returned { // fn panicked or called runtime.Goexit
			span.SetAttributes(VerdictKey.String("failed"))
			span.SetStatus(codes.Error, "panic")
			span.End()
			b.spans[i] = nil
		}
	}()
	res, err := fn(ctx, i)
	returned = true
	b.failed[i] = err != nil
	return res, err
}

// endAll ends the process spans still open, with the verdicts of errs, the
// errors DoEach returned; with none (nil: a fn panicked), without verdicts.
func (b *eachSpans) endAll(errs []error) {
	for i, span := range b.spans {
		if span == nil {
			continue
		}
		end := trace.WithTimestamp(b.ended[i])
		if i < len(errs) {
			v := verdict(errs[i], true, b.failed[i])
			span.SetAttributes(VerdictKey.String(v))
			if v != "processed" {
				b.cfg.recordError(span, b.keys[i], errs[i], end)
			}
		}
		span.End(end)
		b.spans[i] = nil
	}
}

// oneChannel returns the channel every one of n keys has, and true; false if
// they have several, or none.
func oneChannel(n int, key func(i int) dedupe.Key) (string, bool) {
	if n == 0 {
		return "", false
	}
	ch := key(0).Channel
	for i := 1; i < n; i++ {
		if key(i).Channel != ch {
			return "", false
		}
	}
	return ch, true
}

// recordEachErrors marks span, the span of a batch of n items, failed if the
// items of failed (their indices; errs holds their errors, key their keys)
// are not none: an error status that counts them, the first one's error as
// an exception event, and error.type: the failures' common type, or _OTHER.
func (c *config) recordEachErrors(span trace.Span, what string, n int, failed []int, errs []error, key func(int) dedupe.Key) {
	if len(failed) == 0 {
		return
	}
	first := failed[0]
	typ := errorType(errs[first])
	for _, i := range failed[1:] {
		if errorType(errs[i]) != typ {
			typ = semconv.ErrorTypeOther.Value.AsString()
			break
		}
	}
	c.recordError(span, key(first), errs[first])
	msg, _ := c.masked(key(first), semconv.ExceptionMessageKey, errs[first].Error())
	span.SetStatus(codes.Error, fmt.Sprintf("%d of %d %s failed, the first: %s", len(failed), n, what, msg))
	span.SetAttributes(semconv.ErrorTypeKey.String(typ))
}
