package dedupelog_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupelog"
)

// A gateway logging at info level keeps the Deduper's decision records, one
// duplicate in 100, with message ids hashed under a secret key.
func Example() {
	secret := []byte("a secret of 16 bytes or more")
	var h slog.Handler = slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level: slog.LevelInfo,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == "processing_time" {
				return slog.Attr{} // vary from run to run
			}
			return a
		},
	})
	h = dedupelog.Mask(h, dedupelog.Hash, secret)
	h = dedupelog.SampleDuplicates(h, 100)
	h = dedupelog.Level(h, slog.LevelInfo)
	d := dedupe.New(nil, dedupe.WithLogger(slog.New(h)))

	ctx := dedupe.ContextWithTraceID(context.Background(), "4bf92f3577b34da6a3ce929d0e0e4736")
	key := dedupe.Key{Channel: "telegram", MessageID: "123456789"}
	for range 3 {
		err := d.Do(ctx, key, func(context.Context) error { return nil })
		fmt.Println("Do:", err)
	}
	// Output:
	// level=INFO msg="dedupe: decision" trace_id=4bf92f3577b34da6a3ce929d0e0e4736 platform=telegram message_id=406c27a650c6d93003a62d7771fa0376 dedup_phase=memory result=processed
	// Do: <nil>
	// level=INFO msg="dedupe: decision" trace_id=4bf92f3577b34da6a3ce929d0e0e4736 platform=telegram message_id=406c27a650c6d93003a62d7771fa0376 dedup_phase=memory result=duplicate sample_every=100
	// Do: dedupe: duplicate message
	// Do: dedupe: duplicate message
}
