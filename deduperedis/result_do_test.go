package deduperedis_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// TestDoResultInstances runs DoResult on two gateway instances (two stores,
// each with its own client, over the shared server): see raceDoResult.
func TestDoResultInstances(t *testing.T) {
	addr := redisAddr(t)
	prefix := "dedupe-test:" + randomID(t) + ":"
	var stores [2]*deduperedis.Store
	for i := range stores {
		stores[i] = newStore(t, newClient(t, addr, nil), deduperedis.Config{Prefix: prefix})
	}
	raceDoResult(t, stores)
}

// TestClusterResults runs the result tests on the test cluster
// (DEDUPE_REDIS_CLUSTER_ADDRS), and DoResult on two instances of it, each
// with its own ClusterClient.
func TestClusterResults(t *testing.T) {
	addrs := clusterAddrs(t)
	client := newClusterClient(t, addrs)
	for name, check := range map[string]func(*testing.T, redis.UniversalClient){
		"round trip": checkRoundTrip, "states": checkStates, "too large": checkTooLarge,
		"mark drops": checkMarkDrops, "expiry": checkExpiry,
	} {
		t.Run(name, func(t *testing.T) { check(t, client) })
	}
	t.Run("DoResult", func(t *testing.T) {
		prefix := "dedupe-test:" + randomID(t) + ":"
		var stores [2]*deduperedis.Store
		for i := range stores {
			stores[i] = newStore(t, newClusterClient(t, addrs), deduperedis.Config{Prefix: prefix})
		}
		raceDoResult(t, stores)
	})
}

// copiesAtOnce is how many copies of each message raceDoResult sends at
// once, half to each instance.
const copiesAtOnce = 16

// raceDoResult sends, for each of resultPayloads, copiesAtOnce copies of a
// message at once to two Dedupers with WithWait, one on each store: fn runs
// once per message, and returns only once every other copy waits for it (the
// Dedupers count the waits; the messages go one after the other, so the count
// is the message's). Every copy gets fn's bytes: the one that ran it with no
// error, the waiters with ErrDuplicate. A copy that comes after the mark, on
// either instance, gets them too, without running fn.
func raceDoResult(t *testing.T, stores [2]*deduperedis.Store) {
	var ds [2]*dedupe.Deduper
	for i, st := range stores {
		ds[i] = dedupe.New(st, dedupe.WithWait(time.Minute))
		t.Cleanup(func() { _ = ds[i].Close() })
	}
	waits := func() uint64 { return ds[0].Stats().Waits + ds[1].Stats().Waits }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for m, p := range resultPayloads(t) {
		k := dedupe.Key{Channel: "doresult", MessageID: fmt.Sprint(m)}
		before := waits()
		var runs atomic.Int32
		fn := func(context.Context) ([]byte, error) {
			runs.Add(1)
			if !poll(30*time.Second, func() bool { return waits()-before >= copiesAtOnce-1 }) {
				return nil, errors.New("the other copies do not all wait")
			}
			return bytes.Clone(p.data), nil
		}
		var results [copiesAtOnce][]byte
		var errs [copiesAtOnce]error
		var wg sync.WaitGroup
		for c := range copiesAtOnce {
			wg.Go(func() { results[c], errs[c] = ds[c%2].DoResult(ctx, k, fn) })
		}
		wg.Wait()
		ran := 0
		for c := range copiesAtOnce {
			if errs[c] == nil {
				ran++
			} else {
				assert.ErrorIs(t, errs[c], dedupe.ErrDuplicate, "%s: copy %d: DoResult, want nil or ErrDuplicate", p.name, c)
			}
			assert.Equal(t, p.data, results[c], "%s: copy %d", p.name, c)
		}
		for i, d := range ds {
			res, err := d.DoResult(ctx, k, fn)
			assert.ErrorIs(t, err, dedupe.ErrDuplicate, "%s: later copy on instance %d", p.name, i)
			assert.Equal(t, p.data, res, "%s: later copy on instance %d: want fn's bytes", p.name, i)
		}
		assert.Equal(t, int32(1), runs.Load(), "%s: times fn ran", p.name)
		assert.Equal(t, 1, ran, "%s: copies that returned nil", p.name)
	}
	s := [2]dedupe.Stats{ds[0].Stats(), ds[1].Stats()}
	t.Logf("waits ended by the mark: %d; store errors: %d", s[0].WaitsDuplicate+s[1].WaitsDuplicate, s[0].StoreErrors+s[1].StoreErrors)
}

// poll reports whether cond holds within limit, asking every millisecond:
// it polls the state of other goroutines, it does not wait out a TTL.
func poll(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
	}
	return true
}

// pipelines is a go-redis hook that records the command names of every
// pipeline its client sends, but for the handshakes of new connections.
type pipelines struct {
	mu   sync.Mutex
	sent [][]string
}

func (*pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		names := make([]string, 0, len(cmds))
		for _, c := range cmds {
			if c.Name() != "client" && c.Name() != "hello" { // a new connection's handshake
				names = append(names, c.Name())
			}
		}
		if len(names) > 0 {
			h.mu.Lock()
			h.sent = append(h.sent, names)
			h.mu.Unlock()
		}
		return next(ctx, cmds)
	}
}

// TestResultBatched queues MarkResult, Result and Mark calls behind a store's
// stuck round trips, then frees them: they go in one pipeline, each call
// gets its own outcome, and that pipeline holds one SET for each MarkResult
// and Mark and one GET for each Result.
func TestResultBatched(t *testing.T) {
	hook := &pipelines{}
	st, p, stuck, prefix := stuckStore(t, hook)
	ctx := context.Background()
	// Results to read, written beforehand by a store that is not stuck.
	other := newStore(t, newClient(t, redisAddr(t), nil), deduperedis.Config{Prefix: prefix})
	const n = 16
	key := func(kind string, i int) dedupe.Key {
		return dedupe.Key{Channel: "batched", MessageID: fmt.Sprint(kind, i)}
	}
	for i := range n {
		require.NoError(t, other.MarkResult(ctx, key("read", i), []byte(fmt.Sprint("kept ", i)), time.Minute))
	}
	errs := make(chan error, 3*n)
	for i := range n {
		go func() { errs <- st.MarkResult(ctx, key("write", i), []byte(fmt.Sprint("new ", i)), time.Minute) }()
		go func() { errs <- st.Mark(ctx, key("plain", i), time.Minute) }()
		go func() {
			res, marked, err := st.Result(ctx, key("read", i))
			if err == nil && (!marked || string(res) != fmt.Sprint("kept ", i)) {
				err = fmt.Errorf("Result(%s) = %q, %v", key("read", i), res, marked)
			}
			errs <- err
		}()
	}
	until(t, "every call queued", func() bool { return deduperedis.Queued(st) == 3*n })
	hook.mu.Lock()
	hook.sent = nil // the stuck round trips' own
	hook.mu.Unlock()
	p.DropReplies(false)
	p.Cut()
	for range deduperedis.RoundsInFlight {
		<-stuck
	}
	for range 3 * n {
		assert.NoError(t, <-errs)
	}
	for i := range n {
		checkResult(t, other, key("write", i), []byte(fmt.Sprint("new ", i)))
		checkResult(t, other, key("plain", i), nil)
	}
	hook.mu.Lock()
	defer hook.mu.Unlock()
	require.Len(t, hook.sent, 1, "pipelines sent for %d queued calls", 3*n)
	count := map[string]int{}
	for _, name := range hook.sent[0] {
		count[name]++
	}
	assert.Equal(t, 2*n, count["set"], "pipeline of %d commands: %v; SET", len(hook.sent[0]), count)
	assert.Equal(t, n, count["get"], "pipeline of %d commands: %v; GET", len(hook.sent[0]), count)
	assert.Len(t, hook.sent[0], 3*n, "pipeline of %d commands: %v", len(hook.sent[0]), count)
}
