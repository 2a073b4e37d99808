package dedupe

import "context"

type traceKey struct{}

// ContextWithTraceID returns ctx carrying a trace id, which a [Deduper] logs
// as "trace_id".
func ContextWithTraceID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, traceKey{}, id)
}

// TraceID returns the trace id set by [ContextWithTraceID], or "".
func TraceID(ctx context.Context) string {
	id, _ := ctx.Value(traceKey{}).(string)
	return id
}
