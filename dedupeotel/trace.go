package dedupeotel

import (
	"context"

	"github.com/gatewaykit/dedupe"
	"go.opentelemetry.io/otel/trace"
)

// TraceID returns the trace id of the span ctx carries, in hex, or else the
// one set by [dedupe.ContextWithTraceID] (or ""). Give it to
// [dedupe.WithTraceID] so that the Deduper's log records carry the trace id
// of the OpenTelemetry trace they belong to:
//
//	d := dedupe.New(store, dedupe.WithTraceID(dedupeotel.TraceID))
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return dedupe.TraceID(ctx)
}
