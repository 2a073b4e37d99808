package dedupeotel

import (
	"context"
	"errors"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupelog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// instrumentationName names this package's tracer.
const instrumentationName = "github.com/gatewaykit/dedupe/dedupeotel"

// Attributes of this package's own, where the semantic conventions have none.
const (
	// VerdictKey is the decision of a Do or a delivery: the result of its
	// Deduper's decision record (processed, duplicate, in_flight, failed,
	// store_error or abandoned), or for a delivery the Deduper did not
	// decide, the dedupehttp verdict or header value (see [Handler]).
	VerdictKey = attribute.Key("dedupe.verdict")
	// ClaimStatusKey is the answer of a store's Claim: claimed, duplicate or
	// in_flight.
	ClaimStatusKey = attribute.Key("dedupe.claim.status")
	// BackendKey is the store's [dedupe.Store.Backend].
	BackendKey = attribute.Key("dedupe.store.backend")
	// AnswerKey is, on a delivery's span, the [dedupehttp.HeaderVerdict] the
	// middleware answered with when it differs from the verdict: "replayed"
	// for a duplicate given the first answer, "unavailable" for a store
	// error, "queued" for a message [dedupehttp.Async] took.
	AnswerKey = attribute.Key("dedupe.answer")
	// WaitResultKey is how a wait for an in-flight copy ended: claimed,
	// duplicate, or the Do's verdict if the wait lasted to its end.
	WaitResultKey = attribute.Key("dedupe.wait.result")
	// WaitPollsKey is how many times a wait asked for the claim again: one
	// span holds a wait, however long; of its claims only the last is a
	// span (a copy waiting out Telegram's 40 s budget asks about 160 times).
	WaitPollsKey = attribute.Key("dedupe.wait.polls")

	// ProcessedCountKey is, on a [Deduper.DoEach] span, the number of keys
	// processed by the batch (fn ran and succeeded, and the key is marked).
	ProcessedCountKey = attribute.Key("dedupe.batch.processed_count")
	// DuplicateCountKey is the number of keys of a batch processed before
	// ([dedupe.ErrDuplicate]): on a DoEach span, and on a ClaimEach span the
	// claims that answered duplicate.
	DuplicateCountKey = attribute.Key("dedupe.batch.duplicate_count")
	// InFlightCountKey is the number of keys of a batch held by other callers
	// ([dedupe.ErrInFlight]): on a DoEach span, and on a ClaimEach span the
	// claims that answered in_flight.
	InFlightCountKey = attribute.Key("dedupe.batch.in_flight_count")
	// FailedCountKey is the number of keys of a batch that failed: on a
	// DoEach span every error but ErrDuplicate and ErrInFlight, on the span
	// of a store's batch call the items whose call returned an error.
	FailedCountKey = attribute.Key("dedupe.batch.failed_count")
	// ClaimedCountKey is, on a ClaimEach span, the number of claims that
	// answered claimed.
	ClaimedCountKey = attribute.Key("dedupe.batch.claimed_count")
)

// An Option configures [NewStore], [NewDeduper], [Handler] and [Annotate].
type Option func(*config)

type config struct {
	tp          trace.TracerProvider
	propagators propagation.TextMapPropagator
	mask        *dedupelog.Masker // nil: ids as they are
	tracer      trace.Tracer
}

func newConfig(opts []Option) *config {
	c := &config{}
	for _, o := range opts {
		o(c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.propagators == nil {
		c.propagators = otel.GetTextMapPropagator()
	}
	c.tracer = c.tp.Tracer(instrumentationName)
	return c
}

// WithTracerProvider sets the provider of the spans (default: the global
// one, otel.GetTracerProvider, when the span is made).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithPropagators sets how [Handler] reads a caller's trace context from the
// request's headers (default: the global propagators, otel.GetTextMapPropagator).
func WithPropagators(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagators = p }
}

// WithMask hides the message id in the spans as [dedupelog.Mask] hides it
// in the log records, with the same [dedupelog.Masker] rule and the fields it
// lists ([dedupelog.Fields]): messaging.message.id is hashed under key
// ([dedupelog.Hash], so that a message's spans match its records masked
// with the same key) or left out ([dedupelog.Drop]), and the key or the id
// quoted in a recorded error (exception.message) and in a span's status
// description is replaced. The platform (messaging.system) stays. A message
// id can identify a user or a conversation (see docs/observability.md).
func WithMask(mode dedupelog.Mode, key []byte) Option {
	m := dedupelog.NewMasker(mode, key)
	return func(c *config) { c.mask = m }
}

// WithoutMessageID leaves the attribute messaging.message.id out of the
// spans, and hides the id in their error texts: it is
// WithMask([dedupelog.Drop], nil). The platform (messaging.system) stays.
func WithoutMessageID() Option { return WithMask(dedupelog.Drop, nil) }

// masked returns value, the value of the attribute name, with key's message
// id hidden as [WithMask] says; ok is false for an attribute to leave out.
func (c *config) masked(key dedupe.Key, name attribute.Key, value string) (string, bool) {
	if c.mask == nil {
		return value, true
	}
	return c.mask.Field(string(name), value, key.Channel, key.MessageID)
}

// keyAttrs returns the attributes naming key.
func (c *config) keyAttrs(key dedupe.Key) []attribute.KeyValue {
	attrs := []attribute.KeyValue{semconv.MessagingSystemKey.String(key.Channel)}
	if id, ok := c.masked(key, semconv.MessagingMessageIDKey, key.MessageID); ok {
		attrs = append(attrs, semconv.MessagingMessageID(id))
	}
	return attrs
}

// recordError marks span failed with err, as redisotel's recordError does,
// with error.type set: an exception event (with opts, such as its time) and
// an error status, whose texts hide key's message id as [WithMask] says.
func (c *config) recordError(span trace.Span, key dedupe.Key, err error, opts ...trace.EventOption) {
	msg, _ := c.masked(key, semconv.ExceptionMessageKey, err.Error())
	span.AddEvent(semconv.ExceptionEventName, append(opts, trace.WithAttributes(
		semconv.ExceptionType(semconv.ErrorType(err).Value.AsString()), semconv.ExceptionMessage(msg)))...)
	span.SetStatus(codes.Error, msg)
	span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
}

// errorType returns a low-cardinality name for err: the sentinel of package
// dedupe or context it wraps, or its Go type.
func errorType(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{dedupe.ErrNotOwner, "dedupe.ErrNotOwner"},
		{dedupe.ErrClosed, "dedupe.ErrClosed"},
		{dedupe.ErrStoreFull, "dedupe.ErrStoreFull"},
		{dedupe.ErrInvalidKey, "dedupe.ErrInvalidKey"},
		{dedupe.ErrInFlight, "dedupe.ErrInFlight"}, // a Forget refused
		{dedupe.ErrReadOnly, "dedupe.ErrReadOnly"},
		{context.DeadlineExceeded, "context.DeadlineExceeded"},
		{context.Canceled, "context.Canceled"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return semconv.ErrorType(err).Value.AsString()
}
