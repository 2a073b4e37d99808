package dedupe_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gatewaykit/dedupe"
)

// BenchmarkDoPayload measures a copy answered on a memory store with the
// payload check (a Telegram update of 300 bytes fingerprinted, the kept
// fingerprint read and compared) beside the key alone, the baseline, and a
// message processed both ways.
func BenchmarkDoPayload(b *testing.B) {
	body := fmt.Appendf(nil, `{"update_id":123456789,"message":{"message_id":42,"from":{"id":1234567,"is_bot":false,"first_name":"Alice","username":"alice"},"chat":{"id":1234567,"first_name":"Alice","username":"alice","type":"private"},"date":1765100000,"text":"%s"}}`, "hello, this is a message of some length")
	ok := func(context.Context) error { return nil }
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		do   func(d *dedupe.Deduper, k dedupe.Key) error
	}{
		{"key-alone-baseline", func(d *dedupe.Deduper, k dedupe.Key) error { return d.Do(ctx, k, ok) }},
		{"payload", func(d *dedupe.Deduper, k dedupe.Key) error {
			return d.With(dedupe.WithPayload(body)).Do(ctx, k, ok)
		}},
	} {
		b.Run("duplicate/"+tc.name, func(b *testing.B) {
			d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1 << 20}), dedupe.WithPayloadCheck())
			defer d.Close()
			k := dedupe.Key{Channel: "telegram", MessageID: "1"}
			if err := tc.do(d, k); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := tc.do(d, k); err != dedupe.ErrDuplicate {
					b.Fatal(err)
				}
			}
		})
		b.Run("processed/"+tc.name, func(b *testing.B) {
			d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1 << 20}), dedupe.WithPayloadCheck())
			defer d.Close()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if err := tc.do(d, dedupe.Key{Channel: "telegram", MessageID: fmt.Sprint(i)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
