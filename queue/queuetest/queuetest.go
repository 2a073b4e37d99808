// Package queuetest is the conformance suite for implementations of
// [queue.Queue]. Every queue in this repository runs it; a third-party queue
// should too (and the crash tests of package dedupehttp/durabletest, which
// put the queue behind the middleware):
//
//	func TestQueueConformance(t *testing.T) {
//		queuetest.Run(t, queuetest.Config{
//			New: func(t *testing.T, o queuetest.Options) queue.Queue {
//				return myqueue.New(myqueue.Config{Visibility: o.Visibility, Retention: o.Retention})
//			},
//		})
//	}
//
// Keys and ids are unique to each run, so queues that share a server need
// not be empty, but each test asks New for a queue of its own (its own
// stream, table or file): a queue's Take hands out any of its messages.
package queuetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/queue"
)

// Options are the settings Run asks of each queue it creates.
type Options struct {
	// Visibility is how long a take must hide a message.
	Visibility time.Duration
	// Retention is how long the state of a settled message must be kept.
	Retention time.Duration
	// MaxDepth, if positive, is the bound on live messages the queue must
	// enforce with [queue.ErrFull].
	MaxDepth int
}

// Config describes the queue under test.
type Config struct {
	// New returns a new, empty queue configured by o. Run closes it (Close is
	// part of the contract being tested, so New should not register its own
	// Close); New may register the removal of what the queue left behind.
	New func(t *testing.T, o Options) queue.Queue

	// Bubble runs each test, New included, in a testing/synctest bubble, so
	// that its timeouts pass in no time: for a queue whose clock is the time
	// package's and that talks to no server, such as
	// [queue.Memory].
	Bubble bool

	// Unit scales the durations of the tests: the visibility timeout is 4
	// units and the retention 6. Default 100 ms; raise it for a slow server.
	// Without Bubble, Run raises it further on a loaded machine: to 8 times
	// the slowest call of 5 probes, each a push, a take and an update, and the
	// overshoot of a 1 ms sleep, so that the margins of the timing checks
	// outlast the delays the machine adds.
	Unit time.Duration
}

// suite is one test's queue and settings.
type suite struct {
	q    queue.Queue
	unit time.Duration
	vis  time.Duration
	ret  time.Duration
	run  string // unique to the run, in keys and ids
	seq  int
}

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, cfg Config) {
	if cfg.New == nil {
		t.Fatal("queuetest: Config.New is nil")
	}
	if cfg.Unit <= 0 {
		cfg.Unit = 100 * time.Millisecond
	}
	if !cfg.Bubble {
		cfg.Unit = max(cfg.Unit, 8*probeDelay(t, cfg))
		t.Logf("queuetest: real-time unit %v", cfg.Unit)
	}
	for _, tc := range []struct {
		name  string
		f     func(*testing.T, *suite)
		depth int // Options.MaxDepth
	}{
		{"PushTakeDone", testPushTakeDone, 0},
		{"MessageRoundTrip", testMessageRoundTrip, 0},
		{"OneLivePerKey", testOneLivePerKey, 0},
		{"VisibilityTimeout", testVisibilityTimeout, 0},
		{"Extend", testExtend, 0},
		{"Requeue", testRequeue, 0},
		{"Failed", testFailed, 0},
		{"NotRun", testNotRun, 0},
		{"DeadLetter", testDeadLetter, 0},
		{"RequeueRefused", testRequeueRefused, 0},
		{"MaxDepth", testMaxDepth, depthBound},
		{"Status", testStatus, 0},
		{"Retention", testRetention, 0},
		{"ConcurrentTakers", testConcurrentTakers, 0},
		{"TakeCancelled", testTakeCancelled, 0},
		{"Close", testClose, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := func(t *testing.T) {
				s := &suite{unit: cfg.Unit, vis: 4 * cfg.Unit, ret: 6 * cfg.Unit, run: rand.Text()[:10]}
				s.q = cfg.New(t, Options{Visibility: s.vis, Retention: s.ret, MaxDepth: tc.depth})
				if s.q == nil {
					t.Fatal("queuetest: New returned nil")
				}
				defer s.q.Close()
				tc.f(t, s)
			}
			if cfg.Bubble {
				synctest.Test(t, body)
			} else {
				body(t)
			}
		})
	}
}

// probeDelay returns the slowest of the calls of 5 probes of the delays a
// real-time test meets here: a push, a take and an update to done, each
// timed on its own, and the overshoot of a 1 ms sleep.
func probeDelay(t *testing.T, cfg Config) time.Duration {
	s := &suite{unit: cfg.Unit, vis: 4 * cfg.Unit, ret: 6 * cfg.Unit, run: rand.Text()[:10]}
	s.q = cfg.New(t, Options{Visibility: s.vis, Retention: s.ret})
	if s.q == nil {
		t.Fatal("queuetest: New returned nil")
	}
	defer s.q.Close()
	var worst time.Duration
	timed := func(f func()) {
		start := time.Now()
		f()
		worst = max(worst, time.Since(start))
	}
	for range 5 {
		var d queue.Delivery
		timed(func() { s.push(t, s.message()) })
		timed(func() { d = s.take(t, 30*time.Second) })
		timed(func() { s.update(t, d, queue.StateDone, 0) })
		start := time.Now()
		time.Sleep(time.Millisecond)
		worst = max(worst, time.Since(start)-time.Millisecond)
	}
	return worst
}

// message returns a new message with a key of its own.
func (s *suite) message() queue.Message {
	s.seq++
	n := strconv.Itoa(s.seq)
	return queue.Message{
		ID:       s.run + "-" + n,
		Key:      dedupe.Key{Channel: "queuetest", MessageID: s.run + "-" + n},
		Method:   http.MethodPost,
		Target:   "/hook?n=" + n,
		Host:     "gateway.example",
		Header:   queue.Header{"Content-Type": {"application/json"}, "X-Multi": {"a", "b"}},
		Body:     []byte(`{"update_id":` + n + `}`),
		TraceID:  "trace-" + n,
		Accepted: time.Unix(1_700_000_000, int64(s.seq)*1000),
	}
}

func (s *suite) ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*s.unit+10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// push pushes m and fails unless it was added.
func (s *suite) push(t *testing.T, m queue.Message) {
	t.Helper()
	id, added, err := s.q.Push(s.ctx(t), m)
	if err != nil || !added || id != m.ID {
		t.Fatalf("Push(%s) = %q, %v, %v; want %q, true, nil", m.ID, id, added, err, m.ID)
	}
}

// take takes a message, waiting at most within.
func (s *suite) take(t *testing.T, within time.Duration) queue.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	d, err := s.q.Take(ctx)
	if err != nil {
		t.Fatalf("Take within %v: %v", within, err)
	}
	return d
}

// none checks that no message becomes visible within d.
func (s *suite) none(t *testing.T, d time.Duration, why string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	got, err := s.q.Take(ctx)
	if err == nil {
		t.Fatalf("%s: Take returned %s (attempt %d)", why, got.ID, got.Attempt)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%s: Take: %v, want context.DeadlineExceeded", why, err)
	}
}

// update moves d on to st after after, and fails on an error.
func (s *suite) update(t *testing.T, d queue.Delivery, st queue.State, after time.Duration) {
	t.Helper()
	if err := s.q.Update(s.ctx(t), d, queue.Change{State: st, After: after}); err != nil {
		t.Fatalf("Update(%s, %s, %v): %v", d.ID, st, after, err)
	}
}

// fail settles d as failed for reason, and fails on an error.
func (s *suite) fail(t *testing.T, d queue.Delivery, reason string) {
	t.Helper()
	if err := s.q.Update(s.ctx(t), d, queue.Change{State: queue.StateFailed, Reason: reason}); err != nil {
		t.Fatalf("Update(%s, failed): %v", d.ID, err)
	}
}

// stale checks that updating d to st is refused with ErrStaleDelivery.
func (s *suite) stale(t *testing.T, d queue.Delivery, st queue.State) {
	t.Helper()
	if err := s.q.Update(s.ctx(t), d, queue.Change{State: st}); !errors.Is(err, queue.ErrStaleDelivery) {
		t.Fatalf("Update(%s, %s) by a stale delivery: %v, want ErrStaleDelivery", d.ID, st, err)
	}
}

// status returns the entry of id and fails unless it is known.
func (s *suite) status(t *testing.T, id string) queue.Entry {
	t.Helper()
	e, ok, err := s.q.Status(s.ctx(t), id)
	if err != nil || !ok {
		t.Fatalf("Status(%s) = %v, %v", id, ok, err)
	}
	return e
}

// wantState checks the state and attempts of id.
func (s *suite) wantState(t *testing.T, id string, st queue.State, attempts int) {
	t.Helper()
	e := s.status(t, id)
	if e.State != st || e.Attempts != attempts {
		t.Fatalf("Status(%s) = %s after %d attempts, want %s after %d", id, e.State, e.Attempts, st, attempts)
	}
}

// wantLen checks the number of live messages.
func (s *suite) wantLen(t *testing.T, want int) {
	t.Helper()
	c, err := s.q.Count(s.ctx(t))
	if err != nil || c.Live != want {
		t.Fatalf("Count = %+v, %v; want %d live", c, err, want)
	}
}

// wantCounts checks the live and failed messages.
func (s *suite) wantCounts(t *testing.T, want queue.Counts) {
	t.Helper()
	c, err := s.q.Count(s.ctx(t))
	if err != nil || c != want {
		t.Fatalf("Count = %+v, %v; want %+v", c, err, want)
	}
}

// sameMessage checks that got carries want intact.
func sameMessage(t *testing.T, got, want queue.Message) {
	t.Helper()
	if got.ID != want.ID || got.Key != want.Key || got.Method != want.Method || got.Target != want.Target ||
		got.Host != want.Host || got.TraceID != want.TraceID || !bytes.Equal(got.Body, want.Body) ||
		!got.Accepted.Equal(want.Accepted) {
		t.Fatalf("message %s changed in the queue:\n got %+v\nwant %+v", want.ID, got, want)
	}
	if len(got.Header) != len(want.Header) || (len(want.Header) > 0 && !reflect.DeepEqual(got.Header, want.Header)) {
		t.Fatalf("message %s: header %v, want %v", want.ID, got.Header, want.Header)
	}
}

// waitOut lets d pass: for the retention of a real server's clock, which
// nothing can be waited on.
func waitOut(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	<-t.C
}

// concurrently runs f in n goroutines and waits for them.
func concurrently(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { f(i) })
	}
	wg.Wait()
}
