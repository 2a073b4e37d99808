package dedupehttp_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupelog"
	"github.com/gatewaykit/dedupe/platform"
)

// unmarkableStore claims as a memory store does and refuses every mark with
// an error that quotes the message id, as a store's error text can.
type unmarkableStore struct{ dedupe.Store }

func (s unmarkableStore) Mark(_ context.Context, key dedupe.Key, _ time.Duration) error {
	return fmt.Errorf("%w: no room to mark %s", dedupe.ErrStoreFull, key.MessageID)
}

func (s unmarkableStore) MarkResult(ctx context.Context, key dedupe.Key, _ []byte, ttl time.Duration) error {
	return s.Mark(ctx, key, ttl)
}

// TestMaskPanicAfterSuccessMarkFailed serves an update whose handler answers
// 200 and then panics, on a store whose mark fails, with the records of the
// middleware and of the Deduper masked by dedupelog.Mask: no record holds
// the raw id, in any field (the mark's error under mark_error included).
// Before mark_error was masked, one record per mode held it, under
// mark_error ("dedupe: telegram:987654321987 processed but not marked: …").
func TestMaskPanicAfterSuccessMarkFailed(t *testing.T) {
	const id = "987654321987"
	secret := []byte("a secret of 16 bytes or more")
	for _, tc := range []struct {
		name string
		mode dedupelog.Mode
	}{
		{"hash", dedupelog.Hash},
		{"drop", dedupelog.Drop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			h := dedupelog.Mask(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}), tc.mode, secret)
			d := dedupe.New(unmarkableStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}, dedupe.WithLogger(slog.New(h)))
			ep := dedupehttp.New(d, platform.Telegram, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusOK)
				panic("after the answer")
			}), dedupehttp.WithLogger(slog.New(h)))

			w := deliver(ep, []byte(`{"update_id":`+id+`}`), nil)
			assert.Equal(t, http.StatusOK, w.Code)
			require.EqualValues(t, 1, ep.Stats().PanicsAfterSuccess)

			recs := logs.records(t)
			var panicked, decision map[string]any
			for _, rec := range recs {
				switch {
				case rec["panic"] == "after the answer":
					panicked = rec
				case rec["msg"] == dedupelog.Decision:
					decision = rec
				}
				for field, v := range rec {
					assert.NotContains(t, fmt.Sprint(v), id, "field %q of %q", field, rec["msg"])
				}
			}
			require.NotNil(t, panicked, "the panic is logged")
			require.NotNil(t, decision, "the decision is logged")
			maskedKey := "telegram" // the key as the masked mark_error quotes it
			if tc.mode == dedupelog.Hash {
				maskedKey += ":" + decision["message_id"].(string)
			}
			assert.Contains(t, panicked["mark_error"], "dedupe: "+maskedKey+" processed but not marked", "mark_error is masked, not left out")
			assert.Greater(t, len(recs), 2, "the Deduper's records are there too")
		})
	}
}
