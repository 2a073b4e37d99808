package dedupeotel_test

import (
	"context"
	"fmt"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupeotel"
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
		verdict := ""
		for _, kv := range s.Attributes {
			if kv.Key == dedupeotel.VerdictKey || kv.Key == dedupeotel.ClaimStatusKey {
				verdict = kv.Value.AsString()
			}
		}
		fmt.Printf("%s %s (parent %q)\n", s.Name, verdict, names[s.Parent.SpanID()])
	}
	// Output:
	// processing, trace id of 32 hex digits
	// dedupe.claim claimed (parent "dedupe.Do")
	// dedupe.mark  (parent "dedupe.Do")
	// dedupe.Do processed (parent "")
	// dedupe.claim duplicate (parent "dedupe.Do")
	// dedupe.Do duplicate (parent "")
}
