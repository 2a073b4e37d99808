package dedupe

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// backlog is the one mechanism that makes work a store failed to take land
// later: the mark of a processed message and the release of a claim. A job is
// retried by one goroutine, with a backoff, until it is done, refused for good,
// or no longer needed (the mark's TTL or the claim's lease ran out). While a
// mark is queued, Do answers copies of its key as duplicates, even once the
// claim's lease has run out on an unreachable store.
type backlog struct {
	bound  int
	now    func() time.Time
	cs     *counters
	logger *slog.Logger

	mu      sync.Mutex
	jobs    []*job
	marks   map[Key]*markCount // keys with a queued mark
	nmarks  atomic.Int64       // len(marks), read without the lock on Do's path
	running bool
	closed  bool
	ctx     context.Context // cancelled by close
	cancel  context.CancelFunc
	exited  chan struct{} // closed when the running goroutine returns
}

// job is one queued store call: a closure and its result (bbolt's Batch).
type job struct {
	mark   Key    // the key of a queued mark
	isMark bool   // a mark; otherwise a release
	result []byte // kept with the mark (see Store.MarkResult)
	until  time.Time
	do     func(context.Context) error
	err    error         // the outcome, set before done is closed
	done   chan struct{} // closed when the job leaves the backlog
	state  atomic.Int32  // jobQueued, jobDeferred or jobFinished
}

// States of a job: Do waits on a queued mark for a while, then leaves it
// deferred, so that the counters say which marks Do did not see land.
const (
	jobQueued = iota
	jobDeferred
	jobFinished
)

var (
	errExpired = errors.New("dedupe: backlog: lease or TTL ran out before the store answered")
	errDropped = errors.New("dedupe: backlog full or closed, work dropped")
)

// Bounds of the backoff between attempts of a failing job, and of one attempt.
const (
	minBacklogBackoff = 50 * time.Millisecond
	maxBacklogBackoff = 2 * time.Second
	backlogTimeout    = 5 * time.Second
)

// backlogBatch bounds the jobs run at once: together, a batching store (the
// Redis and PostgreSQL ones) sends them in a few round trips, so a backlog
// built up during an outage drains in seconds after it.
const backlogBatch = 64

func newBacklog(s settings, cs *counters) *backlog {
	return &backlog{bound: s.queue, now: s.now, cs: cs, logger: s.logger}
}

// queueMark queues the mark of key on st for ttl (<= 0: the store's
// default), counted from now. Copies of key are duplicates until it is done.
func (b *backlog) queueMark(st Store, key Key, res []byte, ttl time.Duration) *job {
	until := b.now().Add(orDefault(ttl, DefaultTTL))
	return b.add(&job{mark: key, isMark: true, result: res, until: until, do: func(ctx context.Context) error {
		left := until.Sub(b.now())
		if ttl <= 0 {
			left = 0 // the store's own default, as the first attempt had
		}
		return markWith(ctx, st, key, res, left)
	}})
}

// queueRelease queues the release of c on st, needed until its lease ends.
func (b *backlog) queueRelease(st Store, c Claim, lease time.Duration) *job {
	b.cs.releasesDeferred.Add(1)
	return b.add(&job{until: b.now().Add(lease), do: func(ctx context.Context) error {
		if err := st.Release(ctx, c); err != nil && !errors.Is(err, ErrNotOwner) {
			return err
		}
		return nil
	}})
}

// add queues j, or finishes it with errDropped if the backlog is full or
// closed.
func (b *backlog) add(j *job) *job {
	j.done = make(chan struct{})
	b.mu.Lock()
	if b.closed || len(b.jobs) >= b.bound {
		b.mu.Unlock()
		b.drop(j, errDropped)
		return j
	}
	b.jobs = append(b.jobs, j)
	if j.isMark {
		if b.marks == nil {
			b.marks = make(map[Key]*markCount)
		}
		m := b.marks[j.mark]
		if m == nil {
			m = &markCount{}
			b.marks[j.mark] = m
		}
		m.n++
		if j.result != nil {
			m.result = j.result
		}
		b.nmarks.Add(1)
	}
	if !b.running {
		b.running = true
		if b.ctx == nil {
			b.ctx, b.cancel = context.WithCancel(context.Background())
		}
		b.exited = make(chan struct{})
		go b.work(b.exited)
	}
	b.mu.Unlock()
	return j
}

// markCount counts the queued marks of one key and keeps the latest result.
type markCount struct {
	n      int
	result []byte
}

// markQueued reports whether a mark of key is queued, and the result it
// keeps.
func (b *backlog) markQueued(key Key) ([]byte, bool) {
	if b.nmarks.Load() == 0 {
		return nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if m := b.marks[key]; m != nil {
		return m.result, true
	}
	return nil, false
}

// finish records j's outcome, forgets its mark and wakes its waiters.
func (b *backlog) finish(j *job, err error) {
	if j.isMark {
		b.mu.Lock()
		if m := b.marks[j.mark]; m != nil {
			if m.n--; m.n <= 0 {
				delete(b.marks, j.mark)
			}
		}
		b.nmarks.Add(-1)
		b.mu.Unlock()
	}
	j.err = err
	if j.state.Swap(jobFinished) == jobDeferred && err == nil {
		b.cs.replayed.Add(1)
	}
	if !j.isMark && err == nil {
		b.cs.releasesReplayed.Add(1)
	}
	close(j.done)
}

// drop finishes j with err and counts it as dropped.
func (b *backlog) drop(j *job, err error) {
	b.cs.dropped.Add(1)
	b.logger.LogAttrs(context.Background(), slog.LevelWarn, "dedupe: backlog work dropped",
		slog.Int("queue", b.bound), slog.Any("error", err))
	if j.state.Load() != jobFinished {
		b.finish(j, err)
	}
}

// leave marks j as left to the backlog by a caller that stopped waiting, and
// reports whether it was still queued (false: it finished meanwhile).
func (j *job) leave(cs *counters) bool {
	if j.state.CompareAndSwap(jobQueued, jobDeferred) {
		cs.deferred.Add(1)
		return true
	}
	return false
}

// work runs the queued jobs until none is left or the backlog is closed.
func (b *backlog) work(exited chan struct{}) {
	defer close(exited)
	backoff := minBacklogBackoff
	for {
		b.mu.Lock()
		jobs := b.jobs
		b.jobs = nil
		if len(jobs) == 0 || b.closed {
			b.jobs = append(jobs, b.jobs...) // close drops what is left
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()

		left := b.runJobs(jobs)
		if len(left) == 0 {
			backoff = minBacklogBackoff
			continue
		}
		b.mu.Lock()
		b.jobs = append(left, b.jobs...)
		b.mu.Unlock()
		t := time.NewTimer(backoff)
		select {
		case <-b.ctx.Done():
		case <-t.C:
		}
		t.Stop()
		backoff = min(2*backoff, maxBacklogBackoff)
	}
}

// runJobs runs jobs, backlogBatch at a time, and returns those left when
// some failed: the store is failing, so the rest waits for the next attempt.
func (b *backlog) runJobs(jobs []*job) []*job {
	for len(jobs) > 0 {
		n := min(len(jobs), backlogBatch)
		failed := make([]bool, n)
		var wg sync.WaitGroup
		for i, j := range jobs[:n] {
			wg.Go(func() { failed[i] = !b.runJob(j) })
		}
		wg.Wait()
		var left []*job
		for i, j := range jobs[:n] {
			if failed[i] {
				left = append(left, j)
			}
		}
		if len(left) > 0 {
			return append(left, jobs[n:]...)
		}
		jobs = jobs[n:]
	}
	return nil
}

// runJob runs j once and reports whether it is finished: done, refused for
// good, or no longer needed.
func (b *backlog) runJob(j *job) bool {
	if b.now().After(j.until) {
		b.finish(j, errExpired) // a lease or TTL ran out meanwhile: nothing left to do
		return true
	}
	ctx, cancel := context.WithTimeout(b.ctx, backlogTimeout)
	defer cancel()
	err := j.do(ctx)
	switch {
	case err == nil:
		b.finish(j, nil)
	case !ambiguous(err):
		b.drop(j, err) // refused for good: closed store, invalid key
	default:
		return false
	}
	return true
}

// flush waits until no job is queued or running, or ctx is done.
func (b *backlog) flush(ctx context.Context) error {
	for {
		b.mu.Lock()
		running, exited := b.running, b.exited
		b.mu.Unlock()
		if !running {
			return nil // empty, or closed: close dropped what was left
		}
		select {
		case <-exited:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close stops the goroutine, waits for it, and drops the jobs left. It is
// idempotent.
func (b *backlog) close() {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return
	}
	b.closed = true
	if b.cancel != nil {
		b.cancel()
	}
	exited := b.exited
	b.mu.Unlock()
	if exited != nil {
		<-exited
	}
	b.mu.Lock()
	left := b.jobs
	b.jobs = nil
	b.mu.Unlock()
	b.cs.dropped.Add(uint64(len(left)))
	for _, j := range left {
		b.finish(j, ErrClosed)
	}
}
