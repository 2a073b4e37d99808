package queue

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe"
)

// DefaultMaxSettled is how many done or failed messages a [Memory]
// keeps the state of at most, by default.
const DefaultMaxSettled = 10_000

// MemoryConfig configures a [Memory]. The zero value gives the
// defaults.
type MemoryConfig struct {
	// MaxDepth bounds the live (queued or processing) messages: Push refuses
	// more with [ErrFull]. Zero or less: no bound.
	MaxDepth int
	// Visibility is how long a take hides a message. Default
	// [DefaultVisibility].
	Visibility time.Duration
	// Retention is how long the state of a done or failed message is kept.
	// Default [DefaultRetention].
	Retention time.Duration
	// MaxSettled bounds the done or failed messages whose state is kept; the
	// oldest are forgotten first. A failed message keeps its request (its
	// body included) for [Memory.Requeue], so this bounds their memory too.
	// Default [DefaultMaxSettled].
	MaxSettled int
}

// Memory is a [Queue] in the process's memory. It has every behaviour
// of a durable queue (visibility timeouts, one live message per key, states)
// but a crash of the process loses every message in it, including those
// already answered 202 Accepted. Use it in tests, and where a lost message is
// acceptable; dedupehttp's Async without a queue keeps its messages in
// memory too.
// Its clock is the time package's, so tests can run it under
// testing/synctest. A Memory is safe for concurrent use.
type Memory struct {
	cfg MemoryConfig

	mu      sync.Mutex
	byID    map[string]*memEntry
	live    map[dedupe.Key]*memEntry
	ready   memHeap     // live entries by the time they become visible
	settled []*memEntry // done or failed, oldest first
	seq     uint64
	wake    chan struct{} // closed when an entry may have become visible sooner
	closed  bool
	done    chan struct{} // closed by Close
}

var _ Queue = (*Memory)(nil)

// memEntry is one message of a Memory.
type memEntry struct {
	msg               Message
	state             State
	attempts          int
	receipt           string
	visible           time.Time
	accepted, updated time.Time
	reason            string // why it failed
	seq               uint64 // push order, for ties in ready
	index             int    // in ready, or -1
}

// NewMemory returns an empty [Memory].
func NewMemory(cfg MemoryConfig) *Memory {
	if cfg.Visibility <= 0 {
		cfg.Visibility = DefaultVisibility
	}
	if cfg.Retention <= 0 {
		cfg.Retention = DefaultRetention
	}
	if cfg.MaxSettled <= 0 {
		cfg.MaxSettled = DefaultMaxSettled
	}
	return &Memory{
		cfg:  cfg,
		byID: make(map[string]*memEntry),
		live: make(map[dedupe.Key]*memEntry),
		wake: make(chan struct{}),
		done: make(chan struct{}),
	}
}

// check returns the error a call fails with before it does anything.
func (q *Memory) check(ctx context.Context) error {
	if q.closed {
		return ErrClosed
	}
	return ctx.Err()
}

// Push queues m unless a live message has its key; see [Queue].
func (q *Memory) Push(ctx context.Context, m Message) (string, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.check(ctx); err != nil {
		return "", false, err
	}
	if e, ok := q.live[m.Key]; ok {
		return e.msg.ID, false, nil
	}
	if _, ok := q.byID[m.ID]; ok || m.ID == "" {
		return "", false, fmt.Errorf("dedupe: memory queue: push: id %q is not new", m.ID)
	}
	if q.cfg.MaxDepth > 0 && len(q.live) >= q.cfg.MaxDepth {
		return "", false, ErrFull
	}
	now := time.Now()
	q.seq++
	e := &memEntry{msg: m, state: StateQueued, visible: now, accepted: now, updated: now, seq: q.seq}
	q.byID[m.ID] = e
	q.live[m.Key] = e
	heap.Push(&q.ready, e)
	q.forget(now)
	q.wakeTakers()
	return m.ID, true, nil
}

// wakeTakers wakes every Take waiting, to look again.
func (q *Memory) wakeTakers() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// Take waits for a visible message and hides it; see [Queue].
func (q *Memory) Take(ctx context.Context) (Delivery, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		d, wait, wake, err := q.tryTake(ctx)
		if err != nil || wait == 0 {
			return d, err
		}
		var tick <-chan time.Time
		if wait > 0 {
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			tick = timer.C
		}
		select {
		case <-wake:
		case <-tick:
		case <-q.done:
		case <-ctx.Done():
		}
	}
}

// tryTake takes the first visible message. If there is none it returns how
// long until the next becomes visible (-1: none is live) and a channel
// closed when that may change.
func (q *Memory) tryTake(ctx context.Context) (Delivery, time.Duration, <-chan struct{}, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.check(ctx); err != nil {
		return Delivery{}, 0, nil, err
	}
	if len(q.ready) == 0 {
		return Delivery{}, -1, q.wake, nil
	}
	now := time.Now()
	e := q.ready[0]
	if wait := e.visible.Sub(now); wait > 0 {
		return Delivery{}, wait, q.wake, nil
	}
	e.state = StateProcessing
	e.attempts++
	e.receipt = NewReceipt()
	e.visible = now.Add(q.cfg.Visibility)
	e.updated = now
	heap.Fix(&q.ready, e.index)
	m := e.msg
	m.Header = m.Header.Clone() // the handler may change its request's
	return Delivery{Message: m, Attempt: e.attempts, Receipt: e.receipt, Visibility: q.cfg.Visibility}, 0, nil, nil
}

// Update moves d on as c says; see [Queue].
func (q *Memory) Update(ctx context.Context, d Delivery, c Change) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.check(ctx); err != nil {
		return err
	}
	e, ok := q.byID[d.ID]
	if c.State == StateDone {
		if ok && e.state != StateDone {
			q.settle(e, StateDone, "")
		}
		return nil
	}
	if !ok || e.state != StateProcessing || e.receipt != d.Receipt {
		return fmt.Errorf("%w: %s", ErrStaleDelivery, d.ID)
	}
	now := time.Now()
	switch c.State {
	case StateProcessing:
		e.visible = now.Add(capAfter(c.After, q.cfg.Visibility, q.cfg.Visibility))
	case StateQueued:
		e.state, e.receipt, e.updated = StateQueued, "", now
		e.visible = now.Add(capAfter(c.After, 0, q.cfg.Visibility))
		if c.NotRun {
			e.attempts--
		}
		q.wakeTakers()
	case StateFailed:
		q.settle(e, StateFailed, c.Reason)
		return nil
	default:
		return fmt.Errorf("dedupe: memory queue: update to state %d", c.State)
	}
	heap.Fix(&q.ready, e.index)
	return nil
}

// settle makes e done or failed: it leaves the live messages and its state
// is kept for the retention; a done message drops its request, a failed one
// keeps it for Requeue.
func (q *Memory) settle(e *memEntry, s State, reason string) {
	now := time.Now()
	if e.state.Live() {
		heap.Remove(&q.ready, e.index)
		delete(q.live, e.msg.Key)
		q.settled = append(q.settled, e)
	}
	e.state, e.receipt, e.updated, e.reason = s, "", now, reason
	if s == StateDone {
		e.msg.Header, e.msg.Body = nil, nil
	}
	q.forget(now)
}

// forget drops the settled entries past the retention or the bound.
func (q *Memory) forget(now time.Time) {
	n := 0
	for n < len(q.settled) {
		e := q.settled[n]
		if len(q.settled)-n <= q.cfg.MaxSettled && now.Sub(e.updated) < q.cfg.Retention {
			break
		}
		delete(q.byID, e.msg.ID)
		q.settled[n] = nil
		n++
	}
	q.settled = q.settled[n:]
}

// Status returns the state of the message with id; see [Queue].
func (q *Memory) Status(ctx context.Context, id string) (Entry, bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.check(ctx); err != nil {
		return Entry{}, false, err
	}
	q.forget(time.Now())
	e, ok := q.byID[id]
	if !ok {
		return Entry{}, false, nil
	}
	return e.entry(), true, nil
}

// entry returns what Status tells of e.
func (e *memEntry) entry() Entry {
	return Entry{ID: e.msg.ID, Key: e.msg.Key, State: e.state, Attempts: e.attempts,
		Accepted: e.accepted, Updated: e.updated, Reason: e.reason}
}

// Count counts the live messages and the failed ones kept.
func (q *Memory) Count(ctx context.Context) (Counts, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.check(ctx); err != nil {
		return Counts{}, err
	}
	q.forget(time.Now())
	c := Counts{Live: len(q.live)}
	for _, e := range q.settled {
		if e.state == StateFailed {
			c.Failed++
		}
	}
	return c, nil
}

// Failed returns the latest failed messages; see [Queue].
func (q *Memory) Failed(ctx context.Context, limit int) ([]Entry, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.check(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = DefaultFailedLimit
	}
	q.forget(time.Now())
	var out []Entry
	for i := len(q.settled) - 1; i >= 0 && len(out) < limit; i-- {
		if e := q.settled[i]; e.state == StateFailed {
			out = append(out, e.entry())
		}
	}
	return out, nil
}

// Requeue puts the failed message with id back; see [Queue].
func (q *Memory) Requeue(ctx context.Context, id string) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.check(ctx); err != nil {
		return false, err
	}
	now := time.Now()
	q.forget(now)
	e, ok := q.byID[id]
	if !ok || e.state != StateFailed {
		return false, nil
	}
	if _, live := q.live[e.msg.Key]; live {
		return false, nil
	}
	q.settled = slices.DeleteFunc(q.settled, func(x *memEntry) bool { return x == e })
	q.seq++
	e.state, e.attempts, e.reason, e.visible, e.updated, e.seq = StateQueued, 0, "", now, now, q.seq
	q.live[e.msg.Key] = e
	heap.Push(&q.ready, e)
	q.wakeTakers()
	return true, nil
}

// Close empties nothing, wakes every Take with [ErrClosed] and makes
// every later call fail with it. It may be called more than once.
func (q *Memory) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.done)
	}
	return nil
}

// memHeap orders live entries by the time they become visible, then by push
// order.
type memHeap []*memEntry

// Len is the number of entries, for container/heap.
func (h memHeap) Len() int { return len(h) }

// Less orders by visibility, then push order.
func (h memHeap) Less(i, j int) bool {
	if !h[i].visible.Equal(h[j].visible) {
		return h[i].visible.Before(h[j].visible)
	}
	return h[i].seq < h[j].seq
}

// Swap swaps two entries and their indexes.
func (h memHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

// Push adds an entry, for container/heap.
func (h *memHeap) Push(x any) {
	e := x.(*memEntry)
	e.index = len(*h)
	*h = append(*h, e)
}

// Pop removes the last entry, for container/heap.
func (h *memHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}
