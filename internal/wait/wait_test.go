package wait

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSleep(t *testing.T) {
	require.NoError(t, Sleep(context.Background(), time.Millisecond), "Sleep")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	require.ErrorIs(t, Sleep(ctx, time.Hour), context.Canceled, "Sleep on a cancelled context")
	require.LessOrEqual(t, time.Since(start), time.Minute, "Sleep on a cancelled context took too long")
}
