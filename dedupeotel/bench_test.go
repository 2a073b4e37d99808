package dedupeotel_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupeotel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// BenchmarkDoEach runs 64-key batches through a traced Deduper over a
// traced store, beside the same batches through the Deduper alone (the
// baseline): over a BatchStore and over a store that is not one, which the
// traced Store calls per key, concurrently, as the Deduper alone does. The
// spans are recorded by the SDK and exported nowhere.
func BenchmarkDoEach(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opt := dedupeotel.WithTracerProvider(tp)
	for _, inner := range []struct {
		name string
		new  func() dedupe.Store
	}{
		{"BatchStore", func() dedupe.Store { return newBatchStore() }},
		{"OneKeyStore", func() dedupe.Store { return oneKeyStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})} }},
	} {
		for _, traced := range []bool{false, true} {
			name := inner.name + "/plain"
			if traced {
				name = inner.name + "/traced"
			}
			b.Run(name, func(b *testing.B) {
				var doEach func(ctx context.Context, keys []dedupe.Key, fn func(context.Context, int) error) []error
				if traced {
					doEach = dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(inner.new(), opt)), opt).DoEach
				} else {
					doEach = dedupe.New(inner.new()).DoEach
				}
				keys := make([]dedupe.Key, 64)
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					for i := range keys {
						keys[i] = dedupe.Key{Channel: "line", MessageID: strconv.Itoa(n)}
						n++
					}
					for _, err := range doEach(context.Background(), keys, func(context.Context, int) error { return nil }) {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
