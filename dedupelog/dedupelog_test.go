package dedupelog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupelog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logs collects JSON records.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) handler(level slog.Level) slog.Handler {
	return slog.NewJSONHandler(l, &slog.HandlerOptions{Level: level})
}

// records returns the records logged so far with msg ("" for all).
func (l *logs) records(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		if msg == "" || rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

var (
	ok   = func(context.Context) error { return nil }
	fail = func(context.Context) error { return errors.New("handler failed") }
	key  = dedupe.Key{Channel: "telegram", MessageID: "424242"}
)

var fields = []string{"trace_id", "platform", "message_id", "dedup_phase", "processing_time", "result"}

func TestOneRecordPerDecision(t *testing.T) {
	ctx := dedupe.ContextWithTraceID(context.Background(), "trace-1")
	var l logs
	d := dedupe.New(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), dedupe.WithLogger(slog.New(l.handler(slog.LevelDebug))))

	require.Error(t, d.Do(ctx, key, fail))
	require.NoError(t, d.Do(ctx, key, ok))
	require.ErrorIs(t, d.Do(ctx, key, ok), dedupe.ErrDuplicate)
	other := dedupe.Key{Channel: "telegram", MessageID: "7"}
	require.NoError(t, d.Do(ctx, other, func(ctx context.Context) error {
		assert.ErrorIs(t, d.Do(ctx, other, ok), dedupe.ErrInFlight)
		return nil
	}))

	all := l.records(t, "")
	recs := l.records(t, dedupelog.Decision)
	require.Len(t, all, 5, "one record per decision, nothing else")
	require.Len(t, recs, 5)
	want := []struct{ id, result string }{
		{"424242", "failed"}, {"424242", "processed"}, {"424242", "duplicate"}, {"7", "in_flight"}, {"7", "processed"},
	}
	for i, rec := range recs {
		for _, f := range fields {
			assert.Contains(t, rec, f, "record %d", i)
		}
		assert.Equal(t, "DEBUG", rec["level"])
		assert.Equal(t, "trace-1", rec["trace_id"])
		assert.Equal(t, "telegram", rec["platform"])
		assert.Equal(t, want[i].id, rec["message_id"])
		assert.Equal(t, want[i].result, rec["result"], "record %d", i)
		assert.Equal(t, "memory", rec["dedup_phase"])
		assert.GreaterOrEqual(t, rec["processing_time"], 0.0)
	}
}

func TestDecisionResults(t *testing.T) {
	ctx := context.Background()
	t.Run("store_error", func(t *testing.T) {
		var l logs
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		require.NoError(t, st.Close())
		d := dedupe.New(st, dedupe.WithLogger(slog.New(l.handler(slog.LevelDebug))))
		require.ErrorIs(t, d.Do(ctx, key, ok), dedupe.ErrClosed)
		recs := l.records(t, dedupelog.Decision)
		require.Len(t, recs, 1)
		assert.Equal(t, "store_error", recs[0]["result"])
		assert.Len(t, l.records(t, "dedupe: store error"), 1, "the warn record stays")
	})
	t.Run("abandoned", func(t *testing.T) {
		var l logs
		d := dedupe.New(nil, dedupe.WithLease(50*time.Millisecond), dedupe.WithRenewal(-1),
			dedupe.WithLogger(slog.New(l.handler(slog.LevelDebug))))
		err := d.Do(ctx, key, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		require.ErrorIs(t, err, dedupe.ErrNotOwner)
		recs := l.records(t, dedupelog.Decision)
		require.Len(t, recs, 1)
		assert.Equal(t, "abandoned", recs[0]["result"])
		assert.GreaterOrEqual(t, recs[0]["processing_time"], float64(40*time.Millisecond))
		assert.Len(t, l.records(t, "dedupe: lease lost, handler's context cancelled"), 1, "the warn record stays")
	})
	t.Run("layers", func(t *testing.T) {
		var l logs
		st, err := dedupe.NewLayered(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), dedupe.NewMemoryStore(dedupe.MemoryConfig{}))
		require.NoError(t, err)
		d := dedupe.New(st, dedupe.WithLogger(slog.New(l.handler(slog.LevelDebug))))
		require.NoError(t, d.Do(ctx, key, ok))
		require.ErrorIs(t, d.Do(ctx, key, ok), dedupe.ErrDuplicate)
		recs := l.records(t, dedupelog.Decision)
		require.Len(t, recs, 2)
		assert.Equal(t, "business", recs[0]["dedup_phase"])
		assert.Equal(t, "transport", recs[1]["dedup_phase"])
		assert.Equal(t, "", recs[1]["trace_id"], "present without a trace")
	})
}

func TestLevel(t *testing.T) {
	ctx := context.Background()
	var l logs
	d := dedupe.New(nil, dedupe.WithLogger(slog.New(dedupelog.Level(l.handler(slog.LevelInfo), slog.LevelInfo))))
	require.NoError(t, d.Do(ctx, key, ok))
	recs := l.records(t, dedupelog.Decision)
	require.Len(t, recs, 1, "kept by a handler at info")
	assert.Equal(t, "INFO", recs[0]["level"])

	logger := slog.New(dedupelog.Level(l.handler(slog.LevelInfo), slog.LevelInfo))
	logger.Debug("other debug record")
	assert.Len(t, l.records(t, "other debug record"), 0, "other debug records stay out")

	var quiet logs
	d = dedupe.New(nil, dedupe.WithLogger(slog.New(dedupelog.Level(quiet.handler(slog.LevelWarn), slog.LevelInfo))))
	require.NoError(t, d.Do(ctx, key, ok))
	assert.Empty(t, quiet.records(t, ""), "below the handler's level")
}

func TestSampleDuplicates(t *testing.T) {
	ctx := context.Background()
	var l logs
	d := dedupe.New(nil, dedupe.WithLogger(slog.New(dedupelog.SampleDuplicates(l.handler(slog.LevelDebug), 4))))
	require.NoError(t, d.Do(ctx, key, ok))
	for range 10 {
		require.ErrorIs(t, d.Do(ctx, key, ok), dedupe.ErrDuplicate)
	}
	var results []string
	for _, rec := range l.records(t, dedupelog.Decision) {
		results = append(results, rec["result"].(string))
		if rec["result"] == "duplicate" {
			assert.Equal(t, 4.0, rec["sample_every"])
		} else {
			assert.NotContains(t, rec, "sample_every")
		}
	}
	assert.Equal(t, []string{"processed", "duplicate", "duplicate", "duplicate"}, results, "the 1st, 5th and 9th of 10 duplicates")
}

func TestMask(t *testing.T) {
	ctx := context.Background()
	secret := []byte("0123456789abcdef")
	run := func(t *testing.T, mode dedupelog.Mode, key []byte) (decision, warn map[string]any, text string) {
		t.Helper()
		var l logs
		d := dedupe.New(nil, dedupe.WithLease(50*time.Millisecond), dedupe.WithRenewal(-1),
			dedupe.WithLogger(slog.New(dedupelog.Mask(l.handler(slog.LevelDebug), mode, key))))
		err := d.Do(ctx, dedupe.Key{Channel: "telegram", MessageID: "424242"}, func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
		require.ErrorIs(t, err, dedupe.ErrNotOwner)
		decisions, warns := l.records(t, dedupelog.Decision), l.records(t, "dedupe: lease lost, handler's context cancelled")
		require.Len(t, decisions, 1)
		require.Len(t, warns, 1)
		return decisions[0], warns[0], l.buf.String()
	}
	t.Run("off", func(t *testing.T) {
		var l logs
		d := dedupe.New(nil, dedupe.WithLogger(slog.New(l.handler(slog.LevelDebug))))
		require.NoError(t, d.Do(ctx, key, ok))
		assert.Equal(t, "424242", l.records(t, dedupelog.Decision)[0]["message_id"])
	})
	t.Run("hash", func(t *testing.T) {
		decision, warn, text := run(t, dedupelog.Hash, secret)
		h, _ := decision["message_id"].(string)
		assert.Len(t, h, 32)
		assert.Equal(t, "telegram", decision["platform"])
		assert.Equal(t, "telegram:"+h, warn["key"])
		assert.Contains(t, warn["error"], "telegram:"+h)
		assert.NotContains(t, text, "424242", "the id appears nowhere")

		again, _, _ := run(t, dedupelog.Hash, secret)
		assert.Equal(t, h, again["message_id"], "one id, one hash")
		other, _, _ := run(t, dedupelog.Hash, []byte("another key, 16+"))
		assert.NotEqual(t, h, other["message_id"], "keyed")
	})
	t.Run("drop", func(t *testing.T) {
		decision, warn, text := run(t, dedupelog.Drop, nil)
		assert.NotContains(t, decision, "message_id")
		for _, f := range fields {
			if f != "message_id" {
				assert.Contains(t, decision, f)
			}
		}
		assert.Equal(t, "telegram", warn["key"])
		assert.NotContains(t, text, "424242")
	})
	t.Run("short key drops", func(t *testing.T) {
		decision, _, text := run(t, dedupelog.Hash, []byte("short"))
		assert.NotContains(t, decision, "message_id")
		assert.NotContains(t, text, "424242")
	})
}
