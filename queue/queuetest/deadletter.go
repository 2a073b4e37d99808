package queuetest

import (
	"errors"
	"testing"

	"github.com/gatewaykit/dedupe/queue"
)

// depthBound is the Options.MaxDepth of testMaxDepth.
const depthBound = 3

// testNotRun: a take given back with NotRun does not count in the attempts;
// one put back without it does.
func testNotRun(t *testing.T, s *suite) {
	m := s.message()
	s.push(t, m)
	d := s.take(t, s.vis)
	if err := s.q.Update(s.ctx(t), d, queue.Change{State: queue.StateQueued, NotRun: true}); err != nil {
		t.Fatalf("Update(queued, not run): %v", err)
	}
	s.wantState(t, m.ID, queue.StateQueued, 0)
	d = s.take(t, s.vis)
	if d.Attempt != 1 {
		t.Fatalf("taken again after a take given back: attempt %d, want 1", d.Attempt)
	}
	s.update(t, d, queue.StateQueued, 0)
	s.wantState(t, m.ID, queue.StateQueued, 1)
	if d = s.take(t, s.vis); d.Attempt != 2 {
		t.Fatalf("taken again after a counted take: attempt %d, want 2", d.Attempt)
	}
	s.update(t, d, queue.StateDone, 0)
}

// testDeadLetter: a failed message keeps its reason and its request; it is
// counted and listed, latest first, and Requeue puts it back, intact, with
// its attempts at zero.
func testDeadLetter(t *testing.T, s *suite) {
	first, second := s.message(), s.message()
	for i, m := range []queue.Message{first, second} {
		s.push(t, m)
		d := s.take(t, s.vis)
		s.fail(t, d, "reason "+m.ID)
		if i == 0 {
			waitOut(s.unit / 10) // second fails later, by any clock's resolution
		}
	}
	s.wantCounts(t, queue.Counts{Live: 0, Failed: 2})
	e := s.status(t, first.ID)
	if e.State != queue.StateFailed || e.Reason != "reason "+first.ID || e.Attempts != 1 {
		t.Fatalf("Status of a failed message = %+v", e)
	}
	list, err := s.q.Failed(s.ctx(t), 0)
	if err != nil || len(list) != 2 || list[0].ID != second.ID || list[1].ID != first.ID {
		t.Fatalf("Failed = %+v, %v; want %s then %s", list, err, second.ID, first.ID)
	}
	if list[1].Reason != "reason "+first.ID || list[1].Key != first.Key {
		t.Fatalf("Failed entry = %+v", list[1])
	}
	if list, err = s.q.Failed(s.ctx(t), 1); err != nil || len(list) != 1 || list[0].ID != second.ID {
		t.Fatalf("Failed(1) = %+v, %v", list, err)
	}
	if ok, err := s.q.Requeue(s.ctx(t), first.ID); !ok || err != nil {
		t.Fatalf("Requeue(%s) = %v, %v", first.ID, ok, err)
	}
	s.wantCounts(t, queue.Counts{Live: 1, Failed: 1})
	e = s.status(t, first.ID)
	if e.State != queue.StateQueued || e.Attempts != 0 || e.Reason != "" {
		t.Fatalf("Status of a requeued message = %+v", e)
	}
	d := s.take(t, s.vis)
	sameMessage(t, d.Message, first)
	if d.Attempt != 1 {
		t.Fatalf("requeued message taken at attempt %d, want 1", d.Attempt)
	}
	s.update(t, d, queue.StateDone, 0)
	s.wantCounts(t, queue.Counts{Live: 0, Failed: 1})
}

// testRequeueRefused: Requeue changes nothing for an id that is not a failed
// message, nor for a failed message whose key is live again.
func testRequeueRefused(t *testing.T, s *suite) {
	done, failed := s.message(), s.message()
	s.push(t, done)
	s.update(t, s.take(t, s.vis), queue.StateDone, 0)
	s.push(t, failed)
	s.fail(t, s.take(t, s.vis), "boom")
	live := s.message()
	live.Key = failed.Key
	s.push(t, live)
	for _, id := range []string{s.run + "-never", done.ID, live.ID, failed.ID} {
		if ok, err := s.q.Requeue(s.ctx(t), id); ok || err != nil {
			t.Fatalf("Requeue(%s) = %v, %v; want false, nil", id, ok, err)
		}
	}
	s.wantState(t, failed.ID, queue.StateFailed, 1)
	s.wantState(t, live.ID, queue.StateQueued, 0)
	s.wantCounts(t, queue.Counts{Live: 1, Failed: 1})
}

// testMaxDepth: a queue with a depth bound refuses a new message with
// ErrFull when it holds that many live ones, still answers a copy of a live
// message with its id, and takes new messages once one is settled.
func testMaxDepth(t *testing.T, s *suite) {
	msgs := make([]queue.Message, depthBound)
	for i := range msgs {
		msgs[i] = s.message()
		s.push(t, msgs[i])
	}
	over := s.message()
	if id, added, err := s.q.Push(s.ctx(t), over); !errors.Is(err, queue.ErrFull) || added {
		t.Fatalf("Push past the bound %d = %q, %v, %v; want ErrFull", depthBound, id, added, err)
	}
	dup := s.message()
	dup.Key = msgs[0].Key
	if id, added, err := s.q.Push(s.ctx(t), dup); err != nil || added || id != msgs[0].ID {
		t.Fatalf("Push of a copy at the bound = %q, %v, %v; want %q, false, nil", id, added, err, msgs[0].ID)
	}
	if _, ok, err := s.q.Status(s.ctx(t), over.ID); ok || err != nil {
		t.Fatalf("Status of a refused message: %v, %v", ok, err)
	}
	s.update(t, s.take(t, s.vis), queue.StateDone, 0)
	s.push(t, over)
	s.wantLen(t, depthBound)
}
