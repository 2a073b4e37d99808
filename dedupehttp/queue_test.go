package dedupehttp_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupehttp/queuetest"
	"github.com/stretchr/testify/require"
)

func TestMemoryQueueConformance(t *testing.T) {
	queuetest.Run(t, queuetest.Config{
		Bubble: true,
		Unit:   time.Minute,
		New: func(t *testing.T, o queuetest.Options) dedupehttp.Queue {
			return dedupehttp.NewMemoryQueue(dedupehttp.MemoryQueueConfig{Visibility: o.Visibility, Retention: o.Retention})
		},
	})
}

func TestSQLiteQueueConformance(t *testing.T) {
	queuetest.Run(t, queuetest.Config{
		New: func(t *testing.T, o queuetest.Options) dedupehttp.Queue {
			q, err := dedupehttp.OpenSQLiteQueue(filepath.Join(t.TempDir(), "queue.db"), dedupehttp.SQLiteQueueConfig{
				Visibility: o.Visibility, Retention: o.Retention, PollInterval: 10 * time.Millisecond,
			})
			require.NoError(t, err)
			return q
		},
	})
}
