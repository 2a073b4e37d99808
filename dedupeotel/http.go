package dedupeotel

import (
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

// Handler wraps a dedupehttp handler ([dedupehttp.New], [dedupehttp.Middleware])
// so that each delivery is a server span, as otelhttp.NewHandler makes one
// per request (go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp,
// handler.go): named "{method} {route}" (the ServeMux pattern) or "{method}",
// with the caller's trace context read from the headers ([WithPropagators]),
// the attributes http.request.method, url.path, http.route,
// http.response.status_code (an error status from 500 on) and dedupe.verdict:
// the middleware's own answer ([dedupehttp.HeaderVerdict]: duplicate,
// in_flight, unauthenticated, unavailable, …) or, for a delivery that
// reached the handler, the verdict [Annotate] saw. The Deduper's store calls
// are children of the span when its store is a [Store], and so is a wait for
// an in-flight copy.
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
	ctx := r.Context()
	span := trace.SpanFromContext(ctx)
	own := !span.IsRecording()
	route := r.Pattern
	if i := strings.IndexByte(route, ' '); i >= 0 {
		route = route[i+1:]
	}
	attrs := append(make([]attribute.KeyValue, 0, 3), semconv.HTTPRequestMethodKey.String(r.Method), semconv.URLPath(r.URL.Path))
	if route != "" {
		attrs = append(attrs, semconv.HTTPRoute(route))
	}
	if own {
		ctx = h.cfg.propagators.Extract(ctx, propagation.HeaderCarrier(r.Header))
		name := r.Method
		if route != "" {
			name += " " + route
		}
		ctx, span = h.cfg.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		defer span.End()
	} else {
		span.SetAttributes(attrs...)
	}
	if sc := span.SpanContext(); sc.HasTraceID() && dedupe.TraceID(ctx) == "" {
		ctx = dedupe.ContextWithTraceID(ctx, sc.TraceID().String())
	}
	ctx, cl := withCall(ctx)
	rw := &recorder{ResponseWriter: w, status: http.StatusOK}
	h.next.ServeHTTP(rw, r.WithContext(ctx))

	v := rw.Header().Get(dedupehttp.HeaderVerdict)
	if v == "" {
		v = cl.verdict()
	}
	if v != "" {
		span.SetAttributes(VerdictKey.String(v))
	}
	cl.finish(v)
	span.SetAttributes(semconv.HTTPResponseStatusCode(rw.status))
	if rw.status >= 500 {
		span.SetStatus(codes.Error, "")
	}
}

// Annotate wraps the handler a dedupehttp middleware runs, so that the
// span of the delivery (the [Handler]'s, otelhttp's, or any the request's
// context carries) gets what [dedupehttp.KeyFrom] says: dedupe.verdict (new,
// duplicate, in_flight, protocol, undeduplicated), messaging.system and
// messaging.message.id (unless [WithoutMessageID]) when the delivery has a
// key.
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
