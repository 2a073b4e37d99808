package dedupe_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// syncBuffer is a bytes.Buffer safe for concurrent writes, for a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMemoryEvictionOfLiveMarksCounted: on the default memory store (10,000
// marks), one sender's flood of 12,000 distinct authenticated ids evicts
// another sender's mark within its TTL, so that its copy runs again. The
// store cannot refuse a flood it cannot tell from traffic, but it does not
// do it silently: every eviction of an unexpired mark is counted, in the
// store and in the Deduper's Stats, and the first is logged at warn level,
// once. Expired marks evicted are not counted.
func TestMemoryEvictionOfLiveMarksCounted(t *testing.T) {
	ctx := context.Background()
	var logs syncBuffer
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	d := dedupe.New(st)
	defer d.Close()
	run := func(k dedupe.Key) bool {
		ran := false
		_ = d.Do(ctx, k, func(context.Context) error { ran = true; return nil })
		return ran
	}
	alice := dedupe.Key{Channel: "telegram", MessageID: "alice:1"}
	require.True(t, run(alice))
	for i := range 12000 {
		require.True(t, run(dedupe.Key{Channel: "telegram", MessageID: fmt.Sprintf("mallory:%d", i)}))
	}
	assert.True(t, run(alice), "alice's copy runs again: her mark was evicted inside its TTL")

	assert.GreaterOrEqual(t, st.Evicted(), uint64(12000+1-10000), "at least the marks beyond MaxSize")
	assert.Equal(t, st.Evicted(), d.Stats().Evicted)

	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), logs.String())
	assert.Contains(t, logs.String(), "evicted a mark before its TTL ran out")
}

// TestMemoryEvictionOfExpiredMarksNotCounted: evicting marks whose TTL ran
// out is the LRU's ordinary work: neither counted nor logged.
func TestMemoryEvictionOfExpiredMarksNotCounted(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	var logs syncBuffer
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 1000, Now: func() time.Time { return now },
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	// 600 and 600 marks: the store evicts, every shard its least recently
	// used, but no shard holds anywhere near its share of 600.
	for i := range 600 {
		require.NoError(t, st.Mark(ctx, dedupe.Key{Channel: "qq", MessageID: fmt.Sprint("old-", i)}, time.Minute))
	}
	now = now.Add(time.Hour)
	for i := range 600 {
		require.NoError(t, st.Mark(ctx, dedupe.Key{Channel: "qq", MessageID: fmt.Sprint("new-", i)}, time.Minute))
	}
	assert.Less(t, st.Len(), 1200, "the store evicted")
	assert.Zero(t, st.Evicted())
	assert.Empty(t, logs.String())
}
