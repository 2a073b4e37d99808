package dedupeotel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupeotel"
	"github.com/gatewaykit/dedupe/platform"
	"go.opentelemetry.io/otel/attribute"
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

// A LINE webhook delivers three events at once, the second of which fails,
// then redelivers them: each batch is a span with the count of each
// verdict, each event whose handler ran a span under it, and the store's
// batch calls its children.
func ExampleDeduper_DoEach() {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	opt := dedupeotel.WithTracerProvider(tp)

	st := dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt)
	d := dedupeotel.NewDeduper(dedupe.New(st), opt)

	keys := []dedupe.Key{ // the webhookEventIds of the events[] of LINE's webhook example (platform/testdata/line_events.json)
		{Channel: "line", MessageID: "01FZ74A0TDDPYRVKNK77XKC3ZR"},
		{Channel: "line", MessageID: "01FZ74ASS536FW97EX38NKCZQK"},
		{Channel: "line", MessageID: "01FZ74B5Y0F4TNKA5SCAVKPEDM"},
	}
	for delivery := range 2 {
		d.DoEach(context.Background(), keys, func(ctx context.Context, i int) error {
			if i == 1 && delivery == 0 {
				return errors.New("reply failed")
			}
			return nil
		})
	}

	children := make(map[[8]byte][]string)
	for _, s := range exp.GetSpans() {
		a := make(map[attribute.Key]attribute.Value)
		for _, kv := range s.Attributes {
			a[kv.Key] = kv.Value
		}
		switch s.Name {
		case "dedupe.process":
			line := fmt.Sprintf("  %s %s %s", s.Name, a["messaging.message.id"].AsString(), a[dedupeotel.VerdictKey].AsString())
			children[s.Parent.SpanID()] = append(children[s.Parent.SpanID()], line)
		case "dedupe.DoEach":
			fmt.Printf("%s %s: %d messages, processed %d, duplicate %d, failed %d\n", s.Name,
				a["messaging.system"].AsString(), a["messaging.batch.message_count"].AsInt64(),
				a[dedupeotel.ProcessedCountKey].AsInt64(), a[dedupeotel.DuplicateCountKey].AsInt64(),
				a[dedupeotel.FailedCountKey].AsInt64())
			for _, line := range children[s.SpanContext.SpanID()] {
				fmt.Println(line)
			}
		}
	}
	// Output:
	// dedupe.DoEach line: 3 messages, processed 2, duplicate 0, failed 1
	//   dedupe.process 01FZ74A0TDDPYRVKNK77XKC3ZR processed
	//   dedupe.process 01FZ74ASS536FW97EX38NKCZQK failed
	//   dedupe.process 01FZ74B5Y0F4TNKA5SCAVKPEDM processed
	// dedupe.DoEach line: 3 messages, processed 1, duplicate 2, failed 0
	//   dedupe.process 01FZ74ASS536FW97EX38NKCZQK processed
}
