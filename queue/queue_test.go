package queue_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/queue"
	"github.com/gatewaykit/dedupe/queue/queuetest"
	"github.com/stretchr/testify/require"
)

func TestMemoryConformance(t *testing.T) {
	queuetest.Run(t, queuetest.Config{
		Bubble: true,
		Unit:   time.Minute,
		New: func(t *testing.T, o queuetest.Options) queue.Queue {
			return queue.NewMemory(queue.MemoryConfig{Visibility: o.Visibility, Retention: o.Retention, MaxDepth: o.MaxDepth})
		},
	})
}

func TestSQLiteConformance(t *testing.T) {
	queuetest.Run(t, queuetest.Config{
		New: func(t *testing.T, o queuetest.Options) queue.Queue {
			q, err := queue.OpenSQLite(filepath.Join(t.TempDir(), "queue.db"), queue.SQLiteConfig{
				Visibility: o.Visibility, Retention: o.Retention, MaxDepth: o.MaxDepth, PollInterval: 10 * time.Millisecond,
			})
			require.NoError(t, err)
			return q
		},
	})
}
