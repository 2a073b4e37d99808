package dedupe_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

func TestLayeredConformance(t *testing.T) {
	dedupetest.Run(t, dedupetest.Config{
		New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
			// A front window of a minute, below the suite's resolution: a front
			// layer may answer for up to its window past the last layer's TTL.
			front := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: time.Minute, MaxSize: o.MaxSize, Now: o.Now})
			back := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: o.TTL, Lease: o.Lease, Now: o.Now})
			l, err := dedupe.NewLayered(front, back)
			require.NoError(t, err)
			return l
		},
	})
}

func TestNewLayeredRefuses(t *testing.T) {
	mem := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	_, err := dedupe.NewLayered(mem)
	require.ErrorContains(t, err, "at least two")
	_, err = dedupe.NewLayered(mem, nil)
	require.ErrorContains(t, err, "layer 1 is nil")
}

// countingStore counts the calls that reach a store.
type countingStore struct {
	dedupe.Store
	claims, exists int
}

func (s *countingStore) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	s.claims++
	return s.Store.Claim(ctx, c, lease)
}

func (s *countingStore) Exists(ctx context.Context, k dedupe.Key) (bool, error) {
	s.exists++
	return s.Store.Exists(ctx, k)
}

// A duplicate of a message this instance processed is answered by the front
// layer, without a call to the shared store; one processed elsewhere is
// decided by the shared store and copied to the front.
func TestLayeredAnswersDuplicatesInFront(t *testing.T) {
	ctx := context.Background()
	clock := dedupetest.NewClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	front := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: 5 * time.Minute, Now: clock.Now})
	shared := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: 72 * time.Hour, Now: clock.Now})
	back := &countingStore{Store: shared}
	l, err := dedupe.NewLayered(front, back)
	require.NoError(t, err)
	var logs bytes.Buffer
	d := dedupe.New(l, dedupe.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))

	require.NoError(t, d.Do(ctx, key1, nop))
	claims := back.claims
	require.ErrorIs(t, d.Do(ctx, key1, nop), dedupe.ErrDuplicate)
	assert.Equal(t, claims, back.claims, "the retry never reached the shared store")
	assert.Regexp(t, `msg="dedupe: decision" trace_id="" platform=telegram message_id=1 dedup_phase=transport processing_time=\S+ result=duplicate`, logs.String())

	// After the front's 5-minute window the shared store (72 h) decides, and
	// the front learns the mark again.
	clock.Advance(10 * time.Minute)
	require.ErrorIs(t, d.Do(ctx, key1, nop), dedupe.ErrDuplicate)
	assert.Equal(t, claims+1, back.claims)
	assert.Contains(t, logs.String(), "dedup_phase=business processing_time=")
	require.ErrorIs(t, d.Do(ctx, key1, nop), dedupe.ErrDuplicate)
	assert.Equal(t, claims+1, back.claims, "copied to the front")

	// Processed by another instance: only the shared store knows.
	other := dedupe.Key{Channel: "telegram", MessageID: "2"}
	require.NoError(t, shared.Mark(ctx, other, 0))
	ok, err := l.Exists(ctx, other)
	require.NoError(t, err)
	assert.True(t, ok)
	ok, err = front.Exists(ctx, other)
	require.NoError(t, err)
	assert.True(t, ok, "Exists copied the mark to the front")

	s := d.Stats()
	assert.Equal(t, map[string]uint64{"transport": 2, "business": 3}, s.Layers)
	assert.Equal(t, s.Layers, l.Answered())
}

// A front layer never remembers a message longer than the shared store.
func TestLayeredFrontWindowNoLongerThanTTL(t *testing.T) {
	ctx := context.Background()
	clock := dedupetest.NewClock(time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
	front := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: 5 * time.Minute, Now: clock.Now})
	back := dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: clock.Now})
	l, err := dedupe.NewLayered(front, back)
	require.NoError(t, err)
	require.NoError(t, l.Mark(ctx, key1, time.Minute))
	clock.Advance(2 * time.Minute)
	ok, err := l.Exists(ctx, key1)
	require.NoError(t, err)
	assert.False(t, ok)
}

// With a fallback, a copy of a message processed here is still answered by
// the primary's front layer, before the fallback's claim; during an outage of
// the shared store the front learns the marks the fallback served, so copies
// are answered there too.
func TestLayeredWithFallback(t *testing.T) {
	ctx := context.Background()
	front := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: 5 * time.Minute})
	shared := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	l, err := dedupe.NewLayered(front, shared)
	require.NoError(t, err)
	local := &countingStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	d := dedupe.New(l, dedupe.WithFallback(local))
	defer d.Close()

	require.NoError(t, d.Do(ctx, key1, nop))
	claims := local.claims
	require.ErrorIs(t, d.Do(ctx, key1, nop), dedupe.ErrDuplicate)
	assert.Equal(t, claims, local.claims, "the copy was answered by the front layer")

	shared.down.Store(true)
	other := dedupe.Key{Channel: "telegram", MessageID: "2"}
	require.NoError(t, d.Do(ctx, other, nop))
	assert.Equal(t, uint64(1), d.Stats().Fallbacks)
	claims = local.claims
	require.ErrorIs(t, d.Do(ctx, other, nop), dedupe.ErrDuplicate)
	assert.Equal(t, claims, local.claims)
	assert.True(t, exists(t, front, other), "the front learnt the mark the fallback served")

	shared.down.Store(false)
	require.NoError(t, d.Flush(ctx))
	assert.True(t, exists(t, shared.Store, other), "the queued mark reached the shared store")
	require.ErrorIs(t, d.Do(ctx, other, nop), dedupe.ErrDuplicate)
	assert.Equal(t, claims, local.claims, "answered by the front layer")
	assert.Equal(t, map[string]uint64{"transport": 2, "business": 1}, d.Stats().Layers)
}
