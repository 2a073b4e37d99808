package deduperedis_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/stretchr/testify/assert"
)

// TestMultiInstance races four stores, each with its own client as four
// gateway processes would have, 64 goroutines each, on the same keys: every key
// is claimed exactly once across all of them, and the winner's mark is seen by
// every store.
func TestMultiInstance(t *testing.T) {
	addr := redisAddr(t)
	const instances, racers, keys = 4, 64, 32
	prefix := "dedupe-test:" + randomID(t) + ":"
	stores := make([]*deduperedis.Store, instances)
	for i := range stores {
		stores[i] = newStore(t, newClient(t, addr, nil), deduperedis.Config{Prefix: prefix, TTL: time.Minute, Lease: time.Minute})
	}
	raceStores(t, stores, racers, keys, "multi")
}

// raceStores races racers goroutines on each store on the same keys of
// channel: every key is claimed exactly once across all of them, and the
// winner's mark is seen by every store.
func raceStores(t *testing.T, stores []*deduperedis.Store, racers, keys int, channel string) {
	instances := len(stores)
	ks := make([]dedupe.Key, keys)
	for i := range ks {
		ks[i] = dedupe.Key{Channel: channel, MessageID: fmt.Sprint(i)}
	}

	claimed, marked := make([]atomic.Int32, keys), make([]atomic.Int32, keys)
	var statuses [4]atomic.Int64 // by dedupe.Status
	errs := make(chan error, instances*racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	ctx := context.Background()
	for i, st := range stores {
		for g := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for j := range keys {
					k := (j + g + i*racers/instances) % keys // racers meet keys in different orders
					_, cSt, err := claimNew(ctx, st, ks[k], 0)
					if err != nil {
						errs <- fmt.Errorf("store %d: Claim(%s): %w", i, ks[k], err)
						return
					}
					statuses[cSt].Add(1)
					if cSt != dedupe.Claimed {
						continue
					}
					claimed[k].Add(1)
					if err := st.Mark(ctx, ks[k], 0); err != nil {
						errs <- fmt.Errorf("store %d: Mark(%s): %w", i, ks[k], err)
						return
					}
					marked[k].Add(1)
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	for k := range ks {
		assert.Equal(t, int32(1), claimed[k].Load(), "times %s was claimed across %d instances, want exactly once", ks[k], instances)
		assert.Equal(t, int32(1), marked[k].Load(), "times %s was marked, want once", ks[k])
	}
	t.Logf("claims: %d claimed, %d duplicate, %d in flight", statuses[dedupe.Claimed].Load(),
		statuses[dedupe.Duplicate].Load(), statuses[dedupe.InFlight].Load())
	checkMarkedEverywhere(t, stores, ks)
}

// checkMarkedEverywhere checks that every store sees every key as marked.
func checkMarkedEverywhere(t *testing.T, stores []*deduperedis.Store, ks []dedupe.Key) {
	t.Helper()
	ctx := context.Background()
	for i, st := range stores {
		for _, k := range ks {
			ok, err := st.Exists(ctx, k)
			assert.NoError(t, err, "store %d: Exists(%s) after the race", i, k)
			assert.True(t, ok, "store %d: Exists(%s) after the race", i, k)
			_, cSt, err := claimNew(ctx, st, k, 0)
			assert.NoError(t, err, "store %d: Claim(%s) after the race", i, k)
			assert.Equal(t, dedupe.Duplicate, cSt, "store %d: Claim(%s) after the race", i, k)
		}
	}
}
