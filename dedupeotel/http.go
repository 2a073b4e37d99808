package dedupeotel

import (
	"context"
	"net/http"
	"strings"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Handler wraps a dedupehttp handler ([dedupehttp.New], [dedupehttp.Middleware],
// [dedupehttp.Async]) so that each delivery is a server span, as
// otelhttp.NewHandler makes one per request
// (go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp,
// handler.go): named "{method} {route}" (the ServeMux pattern) or "{method}",
// with the caller's trace context read from the headers ([WithPropagators]),
// the attributes http.request.method, url.path, http.route,
// http.response.status_code (an error status from 500 on), and what the
// middleware reports of the delivery ([dedupehttp.ContextWithObserver]):
//   - messaging.system and messaging.message.id ([WithMask]) of every
//     delivery with a key: the duplicates and the copies that waited too;
//   - dedupe.verdict: the result of the delivery's decision record
//     (processed, duplicate, in_flight, failed, store_error, abandoned), or
//     for a delivery the Deduper did not decide, the middleware's own answer
//     ([dedupehttp.HeaderVerdict]: unauthenticated, queued, …) or its verdict
//     (protocol, undeduplicated);
//   - dedupe.answer: the HeaderVerdict when it differs from the verdict
//     (replayed, unavailable);
//   - for a failed, abandoned or store_error delivery, its error (error.type,
//     an exception event and an error status), masked as [WithMask] says.
//
// The Deduper's store calls are children of the span when its store is a
// [Store], and so is a wait for an in-flight copy.
//
// Behind otelhttp (or any handler that started a recording span), Handler
// starts no span of its own and adds its attributes to that one:
//
//	h := dedupehttp.New(d, tg, dedupeotel.Annotate(telegramHandler))
//	http.Handle("POST /telegram", otelhttp.NewHandler(dedupeotel.Handler(h), "telegram"))
//
// Handler also sets the span's trace id with [dedupe.ContextWithTraceID]
// (unless the context has one), so that the log records of dedupehttp and of
// a Deduper without [dedupe.WithTraceID] carry it, and [dedupehttp.Async]'s
// durable queue keeps it with the message.
//
// The ResponseWriter the wrapped handler sees unwraps to w
// (http.ResponseController). The work of [dedupehttp.Async] done after the
// answer is not part of the span.
func Handler(next http.Handler, opts ...Option) http.Handler {
	return &handler{next: next, cfg: newConfig(opts)}
}

type handler struct {
	next http.Handler
	cfg  *config
}

// ServeHTTP serves r in the delivery's span.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, span, own := h.start(r)
	if own {
		defer span.End()
	}
	if sc := span.SpanContext(); sc.HasTraceID() && dedupe.TraceID(ctx) == "" {
		ctx = dedupe.ContextWithTraceID(ctx, sc.TraceID().String())
	}
	ctx, cl := withCall(ctx)
	var out dedupehttp.Outcome
	ctx = dedupehttp.ContextWithObserver(ctx, func(o dedupehttp.Outcome) { out = o })
	rw := &recorder{ResponseWriter: w, status: http.StatusOK}
	returned := false
	defer func() { h.settle(span, cl, rw, out, returned) }() // also when the handler panics
	h.next.ServeHTTP(rw, r.WithContext(ctx))
	returned = true
}

// start returns the context and span of the delivery r: a new server span
// (own), or the recording span r's context carries, given the request's
// attributes.
func (h *handler) start(r *http.Request) (context.Context, trace.Span, bool) {
	ctx := r.Context()
	route := r.Pattern
	if i := strings.IndexByte(route, ' '); i >= 0 {
		route = route[i+1:]
	}
	attrs := append(make([]attribute.KeyValue, 0, 3), semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path))
	if route != "" {
		attrs = append(attrs, semconv.HTTPRoute(route))
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attrs...)
		return ctx, span, false
	}
	ctx = h.cfg.propagators.Extract(ctx, propagation.HeaderCarrier(r.Header))
	name := r.Method
	if route != "" {
		name += " " + route
	}
	ctx, span := h.cfg.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, span, true
}

// settle gives the delivery's span what the middleware reported (out): the
// message, the verdict of its decision record (or else the middleware's own
// answer, or what the handler saw), the answer when it differs, the status,
// and a failure's error. returned is false when the handler panicked.
func (h *handler) settle(span trace.Span, cl *call, rw *recorder, out dedupehttp.Outcome, returned bool) {
	answer := rw.Header().Get(dedupehttp.HeaderVerdict)
	v := out.Result
	for _, alt := range []string{answer, string(out.Verdict), cl.verdict()} {
		if v == "" {
			v = alt
		}
	}
	if v != "" {
		span.SetAttributes(VerdictKey.String(v))
	}
	if answer != "" && answer != v {
		span.SetAttributes(AnswerKey.String(answer))
	}
	if out.Key.Channel != "" {
		span.SetAttributes(h.cfg.keyAttrs(out.Key)...)
	}
	cl.finish(v)
	switch {
	case !returned:
		span.SetStatus(codes.Error, "panic")
	case out.Err != nil:
		span.SetAttributes(semconv.HTTPResponseStatusCode(rw.status))
		h.cfg.recordError(span, out.Key, out.Err)
	default:
		span.SetAttributes(semconv.HTTPResponseStatusCode(rw.status))
		if rw.status >= 500 {
			span.SetStatus(codes.Error, "")
		}
	}
}

// Annotate wraps the handler a dedupehttp middleware runs, so that the
// span of the delivery (the [Handler]'s, otelhttp's, or any the request's
// context carries) gets what [dedupehttp.KeyFrom] says while the handler
// runs: dedupe.verdict (new, protocol, undeduplicated; duplicate and
// in_flight under [dedupehttp.WithDuplicate] and [dedupehttp.WithInFlight]),
// messaging.system and messaging.message.id ([WithMask]) when the delivery
// has a key. Behind [Handler], which needs no Annotate, the verdict is then
// replaced by the result of the decision record.
func Annotate(next http.Handler, opts ...Option) http.Handler {
	cfg := newConfig(opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		key, v := dedupehttp.KeyFrom(ctx)
		if cl := callFrom(ctx); cl != nil {
			cl.setVerdict(string(v))
		}
		span := trace.SpanFromContext(ctx)
		if v != "" {
			span.SetAttributes(VerdictKey.String(string(v)))
		}
		if key.Channel != "" {
			span.SetAttributes(cfg.keyAttrs(key)...)
		}
		next.ServeHTTP(w, r)
	})
}

// recorder records the status a handler answers with.
type recorder struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

// WriteHeader records status and writes it.
func (r *recorder) WriteHeader(status int) {
	if !r.wroteHeader {
		r.status, r.wroteHeader = status, true
	}
	r.ResponseWriter.WriteHeader(status)
}

// Write writes p, with status 200 if no status was written.
func (r *recorder) Write(p []byte) (int, error) {
	r.wroteHeader = true
	return r.ResponseWriter.Write(p)
}

// Unwrap returns the ResponseWriter r wraps, for http.ResponseController.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
