package dedupelog_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"

	"github.com/gatewaykit/dedupe"
)

// BenchmarkDo measures Do on a memory store with the Deduper's logger
// disabled (the default), and at info level (its decision records are debug
// and left out), beside the raw store calls Do makes (Claim, Mark), the
// baseline.
func BenchmarkDo(b *testing.B) {
	ctx := context.Background()
	noop := func(context.Context) error { return nil }
	loggers := []struct {
		name string
		opts []dedupe.Option
	}{
		{"disabled", nil},
		{"info", []dedupe.Option{dedupe.WithLogger(slog.New(slog.NewJSONHandler(discard{}, nil)))}},
	}
	for _, l := range loggers {
		b.Run("processed/logger="+l.name, func(b *testing.B) {
			d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), l.opts...)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if err := d.Do(ctx, dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(i)}, noop); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("duplicate/logger="+l.name, func(b *testing.B) {
			d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), l.opts...)
			key := dedupe.Key{Channel: "telegram", MessageID: "1"}
			_ = d.Do(ctx, key, noop)
			b.ReportAllocs()
			for b.Loop() {
				if err := d.Do(ctx, key, noop); err != dedupe.ErrDuplicate {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("baseline/claim+mark", func(b *testing.B) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			c := dedupe.NewClaim(dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(i)})
			if _, err := st.Claim(ctx, c, 0); err != nil {
				b.Fatal(err)
			}
			if err := st.Mark(ctx, c.Key, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
