package deduperedis_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// failoverLoad is pairs of workers on two different stores (two gateway
// instances), each pair working through its own sequence of messages the way
// dedupe.Deduper does: claim, and if claimed, process (count) and mark,
// retrying the mark until it lands; release a claim whose call failed; come
// back to a message in flight. Every call has a 1 s deadline.
type failoverLoad struct {
	stores    []*deduperedis.Store
	processed sync.Map // key string → *atomic.Int32
	last      []atomic.Int64
	errs      atomic.Int64
	stop      atomic.Bool

	mu     sync.Mutex
	errAt  []time.Time // when each failed call returned
	sample map[string]int
}

// run runs worker w of pair p on store st until stop.
func (l *failoverLoad) run(p int, st *deduperedis.Store) {
	for n := 0; !l.stop.Load(); n++ {
		k := dedupe.Key{Channel: "failover", MessageID: fmt.Sprintf("%d-%d", p, n)}
		for !l.stop.Load() && !l.one(st, k) {
		}
		if int64(n) > l.last[p].Load() {
			l.last[p].Store(int64(n))
		}
	}
}

// one makes one attempt at k and reports whether k is done: marked by this
// worker or found marked.
func (l *failoverLoad) one(st *deduperedis.Store, k dedupe.Key) bool {
	c := dedupe.NewClaim(k)
	var s dedupe.Status
	err := call(func(ctx context.Context) (err error) {
		s, err = st.Claim(ctx, c, 30*time.Second)
		return err
	})
	if err != nil {
		l.fail(err)
		for !l.stop.Load() {
			err := call(func(ctx context.Context) error { return st.Release(ctx, c) })
			if err == nil || errors.Is(err, dedupe.ErrNotOwner) {
				break
			}
			l.fail(err)
		}
		return false
	}
	switch s {
	case dedupe.Duplicate:
		return true
	case dedupe.InFlight:
		time.Sleep(5 * time.Millisecond) // the other worker of the pair holds it: poll
		return false
	}
	v, _ := l.processed.LoadOrStore(k.String(), new(atomic.Int32))
	v.(*atomic.Int32).Add(1)
	for {
		err := call(func(ctx context.Context) error { return st.Mark(ctx, k, time.Hour) })
		if err == nil {
			return true
		}
		l.fail(err)
	}
}

// call runs f with a context of 1 s.
func call(f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return f(ctx)
}

// fail counts a failed call.
func (l *failoverLoad) fail(err error) {
	l.errs.Add(1)
	l.mu.Lock()
	l.errAt = append(l.errAt, time.Now())
	if len(l.sample) < 8 {
		l.sample[err.Error()]++
	}
	l.mu.Unlock()
}

// TestClusterKillFailover kills a master with SIGKILL under load and checks
// that once its replica is promoted every call succeeds again, within 2 ×
// cluster-node-timeout + 2 s of the kill, and that no message was processed
// twice and no mark was lost. It logs the errors
// callers saw and the recovery time.
func TestClusterKillFailover(t *testing.T) { testClusterKillFailover(t, deduperedis.Config{}) }

// TestClusterCompactKillFailover is TestClusterKillFailover on the compact
// layout.
func TestClusterCompactKillFailover(t *testing.T) {
	testClusterKillFailover(t, deduperedis.Config{Compact: true})
}

func testClusterKillFailover(t *testing.T, cfg deduperedis.Config) {
	addrs := clusterAddrs(t)
	const pairs = 8
	prefix := "dedupe-test:" + randomID(t) + ":"
	l := &failoverLoad{last: make([]atomic.Int64, pairs), sample: map[string]int{}}
	for range 4 {
		cfg.Prefix = prefix
		l.stores = append(l.stores, newStore(t, newClusterClient(t, addrs), cfg))
	}
	master, _ := masterWithReplica(t, addrs)
	var wg sync.WaitGroup
	for p := range pairs {
		for w := range 2 {
			wg.Go(func() { l.run(p, l.stores[(p+w)%len(l.stores)]) })
		}
	}
	time.Sleep(time.Second) // load before the fault
	lagFrom := l.finished()
	time.Sleep(time.Second)
	signal(t, master, syscall.SIGKILL)
	killedAt := time.Now()
	lagTo := l.finished()
	t.Cleanup(func() { restartNode(t, master, addrs) })
	time.Sleep(20 * time.Second) // the failover, then load after it: the length of the run, not a wait for a result
	l.stop.Store(true)
	wg.Wait()

	recovery := time.Duration(0)
	if n := len(l.errAt); n > 0 {
		sort.Slice(l.errAt, func(i, j int) bool { return l.errAt[i].Before(l.errAt[j]) })
		recovery = l.errAt[n-1].Sub(killedAt)
	}
	t.Logf("kill -9 of master %s: %d failed calls, the last %v after the kill; errors: %v",
		master.addr, l.errs.Load(), recovery.Round(time.Millisecond), l.sample)
	limit := 2*5*time.Second + 2*time.Second
	assert.LessOrEqual(t, recovery, limit, "calls failed until %v after the kill, want within %v", recovery, limit)
	l.check(t, pairs, lagFrom, lagTo)
}

// finished returns, per pair, the last message it finished.
func (l *failoverLoad) finished() []int64 {
	n := make([]int64, len(l.last))
	for p := range l.last {
		n[p] = l.last[p].Load()
	}
	return n
}

// check counts, among every message a pair finished, those processed twice
// and those no longer marked. Replication is asynchronous (Config.Replicas
// 0): a mark the master acknowledged in the second before the kill may not
// have reached the replica, so a mark lost among the messages pair p
// finished between lagFrom[p] and lagTo[p] (the kill; two more for the
// acknowledgements in flight then) is counted apart and logged, not failed
// (4 of 5,419 once, on a machine at load 25, right after another kill test
// had restarted a node). Every other mark must be there.
func (l *failoverLoad) check(t *testing.T, pairs int, lagFrom, lagTo []int64) {
	ctx := context.Background()
	st := l.stores[0]
	var doubles, lost, lag, total int
	for p := range pairs {
		for n := int64(0); n < l.last[p].Load(); n++ {
			k := dedupe.Key{Channel: "failover", MessageID: fmt.Sprintf("%d-%d", p, n)}
			total++
			if v, ok := l.processed.Load(k.String()); ok && v.(*atomic.Int32).Load() > 1 {
				doubles++
			}
			marked, err := st.Exists(ctx, k)
			require.NoError(t, err, "Exists(%s)", k)
			switch {
			case marked:
			case n >= lagFrom[p] && n <= lagTo[p]+2:
				lag++
			default:
				lost++
			}
		}
	}
	t.Logf("%d messages finished: %d processed twice, %d marks lost, %d more lost in the replication lag before the kill", total, doubles, lost, lag)
	assert.Zero(t, doubles+lost, "%d processed twice, %d marks lost", doubles, lost)
}
