package postgres

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/require"
)

// dupShare is the share of deliveries in BenchmarkLayered that are copies of
// a message processed moments ago, as platform retries and proxy copies are.
const dupShare = 0.3

// BenchmarkLayered measures a stream of deliveries of which 30% are copies of
// a recently processed message, by 64 callers: a claim per delivery and a mark
// per claimed one, the work of Deduper.Do around a successful dispatch. It
// compares the PostgreSQL store alone (impl=postgres) with a LayeredStore of
// a MemoryStore (5 min window) in front of it (impl=layered), the
// ClawBridge design's transport and business layers. keys/s counts
// deliveries; claim-p99-µs is the 99th percentile of the Claim, the dedupe
// lookup a webhook waits for.
func BenchmarkLayered(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	pg := newTestStore(b, pool, Config{})
	front := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: 5 * time.Minute})
	layered, err := dedupe.NewLayered(front, pg)
	require.NoError(b, err)
	// Not closed: closing the layered store would close pg, which the test
	// table's cleanup closes.
	contenders := []contender{
		{"postgres", newStream(b, pg).deliver},
		{"layered", newStream(b, layered).deliver},
	}
	for _, c := range contenders {
		warmUp(b, c.op)
	}
	for _, c := range contenders {
		b.Run("impl="+c.name, func(b *testing.B) { callers(b, 64, c.op) })
	}
}

// stream is a delivery stream with dupShare copies, through one store.
type stream struct {
	s    dedupe.Store
	keys *benchKeys
	n    atomic.Int64

	mu     sync.Mutex
	recent [1024]dedupe.Key // keys processed lately, a ring
	filled int
}

func newStream(b *testing.B, s dedupe.Store) *stream {
	return &stream{s: s, keys: &benchKeys{prefix: randomHex(b, 4) + "-"}}
}

// next returns the key of the next delivery: a copy of a recent message for
// three deliveries in ten, a new message otherwise.
func (w *stream) next() (k dedupe.Key, dup bool) {
	i := w.n.Add(1)
	if float64(i%10) < dupShare*10 {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.filled > 0 {
			return w.recent[(i*7919)%int64(min(w.filled, len(w.recent)))], true
		}
	}
	return w.keys.next(), false
}

func (w *stream) processed(k dedupe.Key) {
	w.mu.Lock()
	w.recent[w.filled%len(w.recent)] = k
	w.filled++
	w.mu.Unlock()
}

func (w *stream) deliver(ctx context.Context, lat *[]time.Duration) error {
	k, dup := w.next()
	var status dedupe.Status
	err := timed(lat, func() (err error) {
		status, err = w.s.Claim(ctx, dedupe.NewClaim(k), time.Minute)
		return err
	})
	switch {
	case err != nil:
		return err
	case dup && status != dedupe.Duplicate:
		return fmt.Errorf("a copy of processed %s claimed: %v", k, status)
	case !dup && status != dedupe.Claimed:
		return fmt.Errorf("new key %s: %v", k, status)
	case dup:
		return nil
	}
	if err := w.s.Mark(ctx, k, time.Hour); err != nil {
		return err
	}
	w.processed(k)
	return nil
}

// BenchmarkLayeredExistsNew measures Exists of keys never marked, by 64
// callers, on the PostgreSQL store alone and behind a MemoryStore front layer:
// the case a Bloom filter in front would serve. The front's miss is all a
// filter could save, since a key absent here may be marked by another
// instance and must be asked of PostgreSQL; the ratio of the two is its
// bound.
func BenchmarkLayeredExistsNew(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	pg := newTestStore(b, pool, Config{})
	front := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: 5 * time.Minute})
	layered, err := dedupe.NewLayered(front, pg)
	require.NoError(b, err)
	exists := func(s dedupe.Store) func(ctx context.Context, lat *[]time.Duration) error {
		keys := &benchKeys{prefix: randomHex(b, 4) + "-"}
		return func(ctx context.Context, lat *[]time.Duration) error {
			k := keys.next()
			var ok bool
			err := timed(lat, func() (err error) {
				ok, err = s.Exists(ctx, k)
				return err
			})
			if err == nil && ok {
				err = fmt.Errorf("new key %s exists", k)
			}
			return err
		}
	}
	compare64(b, []contender{{"postgres", exists(pg)}, {"layered", exists(layered)}})
}
