// Package outage holds fault scenarios that the Redis and PostgreSQL stores'
// tests run against their real servers through a fault proxy: what a
// [dedupe.Deduper] promises when its store becomes unreachable mid-delivery.
package outage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/faultproxy"
)

// Open opens a store of the kind under test on the server at addr
// (host:port), in the name space prefix names (letters, digits and "_"):
// stores opened with one prefix share their marks and claims.
type Open func(t *testing.T, addr, prefix string) dedupe.Store

// proxy starts a fault proxy to target, closed with the test.
func proxy(t *testing.T, target string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(target)
	if err != nil {
		t.Fatalf("fault proxy: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// unreachable makes the server unreachable through p (every chunk lost, every
// open connection cut), or reachable again.
func unreachable(p *faultproxy.Proxy, on bool) {
	if on {
		p.SetLoss(1)
		p.Cut()
		return
	}
	p.SetLoss(0)
}

// Releases runs n handlers that each fail just as the store becomes
// unreachable for outage, so their releases fail too. Once the store answers
// again and the Deduper flushed its backlog, another instance must claim
// every key at once: nothing is left claimed for the lease (5 minutes).
func Releases(t *testing.T, open Open, target string, n int, outage time.Duration) {
	p := proxy(t, target)
	prefix := fmt.Sprintf("outage_rel_%d", time.Now().UnixNano())
	d := dedupe.New(open(t, p.Addr(), prefix), dedupe.WithLease(5*time.Minute))
	defer d.Close()

	errHandler := errors.New("handler failed")
	failNow := make(chan struct{})
	var started, wg sync.WaitGroup
	started.Add(n)
	for i := range n {
		wg.Go(func() {
			k := dedupe.Key{Channel: "outage", MessageID: fmt.Sprint(i)}
			err := d.Do(context.Background(), k, func(context.Context) error {
				started.Done()
				<-failNow
				return errHandler
			})
			if !errors.Is(err, errHandler) {
				t.Errorf("Do(%s) = %v, want the handler's error", k, err)
				started.Done() // never ran
			}
		})
	}
	started.Wait()
	unreachable(p, true)
	close(failNow)
	wg.Wait()
	time.Sleep(outage)
	unreachable(p, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}

	other := dedupe.New(open(t, target, prefix)) // the platform's retry, elsewhere
	stranded := 0
	for i := range n {
		k := dedupe.Key{Channel: "outage", MessageID: fmt.Sprint(i)}
		if err := other.Do(ctx, k, func(context.Context) error { return nil }); err != nil {
			stranded++
		}
	}
	s := d.Stats()
	t.Logf("outage %v: %d of %d keys left claimed; releases deferred %d, replayed %d, dropped %d",
		outage, stranded, n, s.DeferredReleases, s.ReplayedReleases, s.Dropped)
	if stranded != 0 {
		t.Errorf("%d of %d keys left claimed after the store came back", stranded, n)
	}
}

// LeaseEnd runs n messages on instance A, which loses its store while its
// handlers run (they honour their context), and on instance B, which reaches
// the store and keeps trying each message. A's handler contexts must end
// before B claims: the two never run one message at once.
func LeaseEnd(t *testing.T, open Open, target string, n int, lease time.Duration) {
	p := proxy(t, target)
	prefix := fmt.Sprintf("outage_lease_%d", time.Now().UnixNano())
	a := dedupe.New(open(t, p.Addr(), prefix), dedupe.WithLease(lease))
	defer a.Close()
	b := dedupe.New(open(t, target, prefix), dedupe.WithLease(lease))

	var cancelledA [64]atomic.Int64 // when A's context ended, in ns since start
	if n > len(cancelledA) {
		t.Fatalf("at most %d messages", len(cancelledA))
	}
	start := time.Now()
	var running sync.WaitGroup
	running.Add(n)
	var wg sync.WaitGroup
	for i := range n {
		k := dedupe.Key{Channel: "outage", MessageID: fmt.Sprint(i)}
		wg.Go(func() {
			err := a.Do(context.Background(), k, func(ctx context.Context) error {
				running.Done()
				<-ctx.Done()
				cancelledA[i].Store(int64(time.Since(start)))
				return ctx.Err()
			})
			if !errors.Is(err, dedupe.ErrNotOwner) {
				t.Errorf("A: Do(%s) = %v, want the run abandoned (ErrNotOwner)", k, err)
			}
		})
	}
	running.Wait()
	unreachable(p, true)
	overlaps, ranB := 0, 0
	var mu sync.Mutex
	for i := range n {
		k := dedupe.Key{Channel: "outage", MessageID: fmt.Sprint(i)}
		wg.Go(func() {
			deadline := time.Now().Add(3 * lease)
			for time.Now().Before(deadline) {
				err := b.Do(context.Background(), k, func(context.Context) error {
					mu.Lock()
					defer mu.Unlock()
					ranB++
					if c := cancelledA[i].Load(); c == 0 || time.Duration(c) > time.Since(start) {
						overlaps++ // A's handler was still running
					}
					return nil
				})
				if err == nil {
					return
				}
				time.Sleep(lease / 50)
			}
		})
	}
	wg.Wait()
	t.Logf("lease %v: B ran %d of %d, %d while A's run went on; A abandoned %d", lease, ranB, n, overlaps, a.Stats().Abandoned)
	if overlaps != 0 || ranB != n {
		t.Errorf("B ran %d of %d messages, %d of them while A's run of the same message went on", ranB, n, overlaps)
	}
}
