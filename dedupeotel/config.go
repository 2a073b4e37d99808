package dedupeotel

import (
	"context"
	"errors"

	"github.com/gatewaykit/dedupe"
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
	// VerdictKey is the decision of a Do or a delivery: processed, duplicate,
	// in_flight, failed, store_error or abandoned for a Do (the results of the
	// Deduper's decision record); a dedupehttp verdict or header value for a
	// delivery.
	VerdictKey = attribute.Key("dedupe.verdict")
	// ClaimStatusKey is the answer of a store's Claim: claimed, duplicate or
	// in_flight.
	ClaimStatusKey = attribute.Key("dedupe.claim.status")
	// BackendKey is the store's [dedupe.Store.Backend].
	BackendKey = attribute.Key("dedupe.store.backend")
	// WaitResultKey is how a wait for an in-flight copy ended: claimed,
	// duplicate, or the Do's verdict if the wait lasted to its end.
	WaitResultKey = attribute.Key("dedupe.wait.result")
)

// An Option configures [NewStore], [NewDeduper], [Handler] and [Annotate].
type Option func(*config)

type config struct {
	tp          trace.TracerProvider
	propagators propagation.TextMapPropagator
	messageID   bool
	tracer      trace.Tracer
}

func newConfig(opts []Option) *config {
	c := &config{messageID: true}
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

// WithoutMessageID leaves the attribute messaging.message.id out of the
// spans: a message id can identify a user or a conversation (see
// docs/observability.md). The platform (messaging.system) stays.
func WithoutMessageID() Option {
	return func(c *config) { c.messageID = false }
}

// keyAttrs returns the attributes naming key.
func (c *config) keyAttrs(key dedupe.Key) []attribute.KeyValue {
	if !c.messageID {
		return []attribute.KeyValue{semconv.MessagingSystemKey.String(key.Channel)}
	}
	return []attribute.KeyValue{
		semconv.MessagingSystemKey.String(key.Channel),
		semconv.MessagingMessageID(key.MessageID),
	}
}

// recordError marks span failed with err, as redisotel's recordError does,
// with error.type set.
func recordError(span trace.Span, err error) {
	span.RecordError(err)
	span.SetStatus(codes.Error, err.Error())
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
		{context.DeadlineExceeded, "context.DeadlineExceeded"},
		{context.Canceled, "context.Canceled"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return semconv.ErrorType(err).Value.AsString()
}
