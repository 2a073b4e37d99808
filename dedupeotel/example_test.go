package dedupeotel_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupeotel"
	"github.com/gatewaykit/dedupe/platform"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// A Deduper over a traced store, with its Do traced: each Do is a span with
// its verdict, and each store call a child span.
func Example() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	opt := dedupeotel.WithTracerProvider(tp)

	st := dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt)
	d := dedupeotel.NewDeduper(dedupe.New(st, dedupe.WithTraceID(dedupeotel.TraceID)), opt)

	key := dedupe.Key{Channel: "telegram", MessageID: "1001"}
	for range 2 {
		_ = d.Do(context.Background(), key, func(ctx context.Context) error {
			fmt.Println("processing, trace id of", len(dedupeotel.TraceID(ctx)), "hex digits")
			return nil
		})
	}

	names := make(map[[8]byte]string)
	for _, s := range exp.GetSpans() {
		names[s.SpanContext.SpanID()] = s.Name
	}
	for _, s := range exp.GetSpans() {
		line := s.Name
		for _, kv := range s.Attributes {
			if kv.Key == dedupeotel.VerdictKey || kv.Key == dedupeotel.ClaimStatusKey {
				line += " " + kv.Value.AsString()
			}
		}
		fmt.Printf("%s (parent %q)\n", line, names[s.Parent.SpanID()])
	}
	// Output:
	// processing, trace id of 32 hex digits
	// dedupe.claim claimed (parent "dedupe.Do")
	// dedupe.mark (parent "dedupe.Do")
	// dedupe.Do processed (parent "")
	// dedupe.claim duplicate (parent "dedupe.Do")
	// dedupe.Do duplicate (parent "")
}

// The webhook middleware behind Handler: a server span per delivery, with
// the dedupe verdict, and the store calls as its children.
func ExampleHandler() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	opt := dedupeotel.WithTracerProvider(tp)

	d := dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt))
	app := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	quiet := dedupehttp.WithLogger(slog.New(slog.DiscardHandler)) // the example preset has no secret
	mux := http.NewServeMux()
	mux.Handle("POST /telegram", dedupeotel.Handler(
		dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram), quiet)(dedupeotel.Annotate(app, opt)), opt))

	for range 2 { // Telegram delivers update 1001, then redelivers it
		r := httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":1001}`))
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	for _, s := range exp.GetSpans() {
		line := s.Name
		for _, kv := range s.Attributes {
			if kv.Key == dedupeotel.VerdictKey || kv.Key == dedupeotel.ClaimStatusKey {
				line += " " + kv.Value.AsString()
			}
		}
		fmt.Println(line)
	}
	// Output:
	// dedupe.claim claimed
	// dedupe.mark
	// POST /telegram processed
	// dedupe.claim duplicate
	// POST /telegram duplicate
}
