package queuetest

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/queue"
)

// testPushTakeDone: a pushed message is taken once, processing, and done
// settles it.
func testPushTakeDone(t *testing.T, s *suite) {
	m := s.message()
	s.push(t, m)
	s.wantLen(t, 1)
	s.wantState(t, m.ID, queue.StateQueued, 0)
	d := s.take(t, s.vis)
	sameMessage(t, d.Message, m)
	if d.Attempt != 1 || d.Receipt == "" || d.Visibility <= 0 {
		t.Fatalf("first take: attempt %d, receipt %q, visibility %v", d.Attempt, d.Receipt, d.Visibility)
	}
	s.wantState(t, m.ID, queue.StateProcessing, 1)
	s.wantLen(t, 1)
	s.none(t, s.unit, "a taken message is hidden")
	s.update(t, d, queue.StateDone, 0)
	s.wantState(t, m.ID, queue.StateDone, 1)
	s.wantLen(t, 0)
	s.update(t, d, queue.StateDone, 0) // done twice is done
	s.stale(t, d, queue.StateProcessing)
	s.stale(t, d, queue.StateQueued)
	s.stale(t, d, queue.StateFailed)
	s.none(t, s.vis+s.unit, "a done message never comes back")
}

// testMessageRoundTrip: every field of a message survives the queue,
// including binary bodies and empty parts.
func testMessageRoundTrip(t *testing.T, s *suite) {
	full := s.message()
	full.Body = []byte{0, 1, 2, 0xff, '"', '\\', '\n'}
	bare := s.message()
	bare.Header, bare.Body, bare.TraceID, bare.Host = nil, nil, "", ""
	bare.Method, bare.Target = http.MethodGet, "/"
	for _, m := range []queue.Message{full, bare} {
		s.push(t, m)
		d := s.take(t, s.vis)
		sameMessage(t, d.Message, m)
		s.update(t, d, queue.StateDone, 0)
	}
}

// testOneLivePerKey: a queue holds one live message per key; once it is
// settled, the key can be pushed again.
func testOneLivePerKey(t *testing.T, s *suite) {
	m := s.message()
	s.push(t, m)
	copy1 := s.message()
	copy1.Key = m.Key
	for _, phase := range []string{"queued", "processing"} {
		id, added, err := s.q.Push(s.ctx(t), copy1)
		if err != nil || added || id != m.ID {
			t.Fatalf("%s: Push of a copy = %q, %v, %v; want %q, false, nil", phase, id, added, err, m.ID)
		}
		if phase == "queued" {
			sameMessage(t, s.take(t, s.vis).Message, m)
		}
	}
	if _, ok, err := s.q.Status(s.ctx(t), copy1.ID); ok || err != nil {
		t.Fatalf("Status of a copy that was not added: %v, %v", ok, err)
	}
	s.wantLen(t, 1)
	d := queue.Delivery{Message: m}
	s.update(t, d, queue.StateDone, 0) // done needs no receipt
	s.push(t, copy1)                   // the key is free again
	d2 := s.take(t, s.vis)
	sameMessage(t, d2.Message, copy1)
	s.update(t, d2, queue.StateDone, 0)
	s.wantState(t, m.ID, queue.StateDone, 1)
}

// testVisibilityTimeout: a message whose taker never comes back is taken
// again once its visibility timeout ran out; the first take is then stale,
// but may still settle it as done.
func testVisibilityTimeout(t *testing.T, s *suite) {
	m := s.message()
	s.push(t, m)
	first := s.take(t, s.vis)
	start := time.Now()
	second := s.take(t, 3*s.vis)
	if waited := time.Since(start); waited < s.vis/2 {
		t.Fatalf("taken again after %v, before the visibility timeout %v", waited, s.vis)
	}
	sameMessage(t, second.Message, m)
	if second.Attempt != 2 || second.Receipt == first.Receipt {
		t.Fatalf("second take: attempt %d, receipt %q (first %q)", second.Attempt, second.Receipt, first.Receipt)
	}
	s.wantState(t, m.ID, queue.StateProcessing, 2)
	s.stale(t, first, queue.StateProcessing)
	s.stale(t, first, queue.StateQueued)
	s.stale(t, first, queue.StateFailed)
	s.update(t, second, queue.StateProcessing, 0)
	s.update(t, first, queue.StateDone, 0) // the first taker processed it after all
	s.wantState(t, m.ID, queue.StateDone, 2)
	s.stale(t, second, queue.StateQueued)
	s.wantLen(t, 0)
}

// testExtend: Update to processing keeps a message hidden past its first
// visibility timeout.
func testExtend(t *testing.T, s *suite) {
	m := s.message()
	s.push(t, m)
	d := s.take(t, s.vis)
	s.none(t, s.vis/2, "before the timeout")
	s.update(t, d, queue.StateProcessing, 0) // hidden until 1.5 vis from the take
	s.none(t, s.vis*3/4, "renewed at half the timeout")
	again := s.take(t, 3*s.vis)
	if again.Attempt != 2 {
		t.Fatalf("after the renewed timeout: attempt %d, want 2", again.Attempt)
	}
	s.update(t, again, queue.StateDone, 0)
}

// testRequeue: a message put back is taken again, at once or after the
// delay given, with the next attempt number.
func testRequeue(t *testing.T, s *suite) {
	m := s.message()
	s.push(t, m)
	d := s.take(t, s.vis)
	s.update(t, d, queue.StateQueued, 0)
	s.wantState(t, m.ID, queue.StateQueued, 1)
	s.stale(t, d, queue.StateProcessing) // not held any more
	d = s.take(t, s.vis)
	if d.Attempt != 2 {
		t.Fatalf("retaken at attempt %d, want 2", d.Attempt)
	}
	start := time.Now() // before Update, which may take long on a loaded machine
	s.update(t, d, queue.StateQueued, s.vis/2)
	d = s.take(t, 3*s.vis)
	if waited := time.Since(start); waited < s.vis/4 || d.Attempt != 3 {
		t.Fatalf("put back for %v: taken after %v at attempt %d", s.vis/2, waited, d.Attempt)
	}
	s.update(t, d, queue.StateDone, 0)
}

// testFailed: a failed message is settled: it is never taken again, and its
// key is free for a new push.
func testFailed(t *testing.T, s *suite) {
	m := s.message()
	s.push(t, m)
	d := s.take(t, s.vis)
	s.fail(t, d, "handler failed: status 500")
	s.wantState(t, m.ID, queue.StateFailed, 1)
	s.wantLen(t, 0)
	s.stale(t, d, queue.StateFailed)
	s.none(t, s.vis+s.unit, "a failed message never comes back")
	again := s.message()
	again.Key = m.Key
	s.push(t, again)
	s.update(t, s.take(t, s.vis), queue.StateDone, 0)
}

// testStatus: Status knows a message's key and times, and nothing of ids it
// never held.
func testStatus(t *testing.T, s *suite) {
	if _, ok, err := s.q.Status(s.ctx(t), s.run+"-never"); ok || err != nil {
		t.Fatalf("Status of an unknown id: %v, %v", ok, err)
	}
	m := s.message()
	s.push(t, m)
	d := s.take(t, s.vis)
	s.update(t, d, queue.StateDone, 0)
	e := s.status(t, m.ID)
	if e.ID != m.ID || e.Key != m.Key || e.Accepted.IsZero() || e.Updated.Before(e.Accepted) {
		t.Fatalf("Status = %+v", e)
	}
}

// testRetention: the state of a settled message is forgotten after the
// retention; a live one is kept however old.
func testRetention(t *testing.T, s *suite) {
	done, live := s.message(), s.message()
	s.push(t, done)
	d := s.take(t, s.vis)
	s.update(t, d, queue.StateDone, 0)
	s.push(t, live)
	waitOut(s.ret + 2*s.unit)
	if _, ok, err := s.q.Status(s.ctx(t), done.ID); ok || err != nil {
		t.Fatalf("Status of a message done %v ago, past the retention %v: %v, %v", s.ret+2*s.unit, s.ret, ok, err)
	}
	s.wantState(t, live.ID, queue.StateQueued, 0)
}

// testConcurrentTakers: messages pushed concurrently are each taken by
// exactly one of several concurrent takers.
func testConcurrentTakers(t *testing.T, s *suite) {
	const n, takers = 40, 4
	msgs := make([]queue.Message, n)
	for i := range msgs {
		msgs[i] = s.message()
	}
	concurrently(n, func(i int) {
		if _, added, err := s.q.Push(s.ctx(t), msgs[i]); err != nil || !added {
			t.Errorf("Push %d: %v, %v", i, added, err)
		}
	})
	var mu sync.Mutex
	taken := map[string]int{}
	concurrently(takers, func(int) {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 2*s.unit)
			d, err := s.q.Take(ctx)
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				return
			}
			if err != nil {
				t.Errorf("Take: %v", err)
				return
			}
			mu.Lock()
			taken[d.ID]++
			mu.Unlock()
			if err := s.q.Update(s.ctx(t), d, queue.Change{State: queue.StateDone}); err != nil {
				t.Errorf("Update: %v", err)
			}
		}
	})
	for _, m := range msgs {
		if taken[m.ID] != 1 {
			t.Errorf("%s taken %d times", m.ID, taken[m.ID])
		}
	}
	s.wantLen(t, 0)
}

// testTakeCancelled: Take returns the context's error when it is done.
func testTakeCancelled(t *testing.T, s *suite) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.q.Take(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Take with a cancelled context: %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	errs := make(chan error, 1)
	go func() {
		_, err := s.q.Take(ctx)
		errs <- err
	}()
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Fatalf("Take cancelled while it waits: %v", err)
	}
}

// testClose: Close wakes a waiting Take with ErrClosed, every later call
// fails with it, and Close may be called again.
func testClose(t *testing.T, s *suite) {
	errs := make(chan error, 1)
	go func() {
		_, err := s.q.Take(context.Background())
		errs <- err
	}()
	s.none(t, s.unit, "empty") // the goroutine is waiting by now, most likely
	if err := s.q.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case err := <-errs:
		if !errors.Is(err, queue.ErrClosed) {
			t.Fatalf("Take waiting at Close: %v, want ErrClosed", err)
		}
	case <-time.After(10*s.unit + 5*time.Second):
		t.Fatal("Take still waiting after Close")
	}
	ctx := s.ctx(t)
	m := s.message()
	if _, _, err := s.q.Push(ctx, m); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Push after Close: %v", err)
	}
	if _, err := s.q.Take(ctx); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Take after Close: %v", err)
	}
	if err := s.q.Update(ctx, queue.Delivery{Message: m}, queue.Change{State: queue.StateDone}); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Update after Close: %v", err)
	}
	if _, _, err := s.q.Status(ctx, m.ID); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Status after Close: %v", err)
	}
	if _, err := s.q.Count(ctx); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Count after Close: %v", err)
	}
	if _, err := s.q.Failed(ctx, 0); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Failed after Close: %v", err)
	}
	if _, err := s.q.Requeue(ctx, m.ID); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Requeue after Close: %v", err)
	}
	if err := s.q.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
