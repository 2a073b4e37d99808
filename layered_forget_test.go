package dedupe_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// A LayeredStore's Forget is decided by its last layer: a live claim there
// refuses it and leaves the front's mark; a front layer that fails keeps its
// copy and the error says so, the last layer's mark being gone; a layer that
// cannot forget makes Forget change nothing.
func TestLayeredForget(t *testing.T) {
	ctx := context.Background()
	layers := func() (front, back *dedupe.MemoryStore, l *dedupe.LayeredStore) {
		front = dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: time.Minute})
		back = dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		l, err := dedupe.NewLayered(front, back)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		return front, back, l
	}
	k := dedupe.Key{Channel: "qq", MessageID: "1"}

	t.Run("RefusedByTheLastLayer", func(t *testing.T) {
		front, back, l := layers()
		require.NoError(t, front.Mark(ctx, k, time.Minute)) // a copy left from before
		_, err := back.Claim(ctx, dedupe.NewClaim(k), time.Hour)
		require.NoError(t, err)
		_, err = l.Forget(ctx, k)
		require.ErrorIs(t, err, dedupe.ErrInFlight)
		ok, err := front.Exists(ctx, k)
		require.NoError(t, err)
		assert.True(t, ok, "a refused Forget dropped the front's mark")
	})

	t.Run("FrontLayerFails", func(t *testing.T) {
		front, back, l := layers()
		require.NoError(t, l.Mark(ctx, k, time.Hour))
		require.NoError(t, front.Close())
		forgotten, err := l.Forget(ctx, k)
		require.ErrorIs(t, err, dedupe.ErrClosed)
		assert.ErrorContains(t, err, "layer transport kept its mark")
		assert.True(t, forgotten, "the last layer's mark was dropped")
		ok, err := back.Exists(ctx, k)
		require.NoError(t, err)
		assert.False(t, ok)
	})

	t.Run("LayerCannotForget", func(t *testing.T) {
		back := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		l, err := dedupe.NewLayered(struct{ dedupe.Store }{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}, back)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Close() })
		require.NoError(t, l.Mark(ctx, k, time.Hour))
		_, err = l.Forget(ctx, k)
		require.True(t, errors.Is(err, errors.ErrUnsupported), "error %v", err)
		ok, err := back.Exists(ctx, k)
		require.NoError(t, err)
		assert.True(t, ok, "Forget changed a layer although another cannot forget")
	})
}
