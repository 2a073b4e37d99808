package dedupe

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// job is work a store failed to take at first: a release after an ambiguous
// Claim, or a mark made while the fallback served. do returns nil once the
// work is done or no longer needed; it is retried until until.
type job struct {
	until time.Time
	do    func(context.Context) error
	// end, if not nil, is called once when the job leaves the backlog: done
	// reports whether do succeeded (false: expired, refused or dropped).
	end func(done bool)
}

// finish calls j.end, if set.
func (j job) finish(done bool) {
	if j.end != nil {
		j.end(done)
	}
}

// backlog runs jobs from one goroutine, backlogBatch at once, retrying with a
// backoff while the primary store fails. The goroutine starts with the first
// job and ends when the queue is empty or the backlog is closed.
type backlog struct {
	mu      sync.Mutex
	jobs    []job
	running bool
	closed  bool
	ctx     context.Context // cancelled by close
	cancel  context.CancelFunc
	exited  chan struct{} // closed when the running goroutine returns
}

// Bounds of the backoff between attempts of a failing job, and of one attempt.
const (
	minBacklogBackoff = 50 * time.Millisecond
	maxBacklogBackoff = 2 * time.Second
	backlogTimeout    = 5 * time.Second
)

// add queues j, or drops and counts it if the queue is full or closed.
func (b *backlog) add(d *Deduper, j job) {
	b.mu.Lock()
	if b.closed || len(b.jobs) >= d.queue {
		b.mu.Unlock()
		j.finish(false)
		d.shared.counters.dropped.Add(1)
		d.logger.LogAttrs(context.Background(), slog.LevelWarn, "dedupe: backlog full or closed, work dropped",
			slog.Int("queue", d.queue))
		return
	}
	b.jobs = append(b.jobs, j)
	if !b.running {
		b.running = true
		if b.ctx == nil {
			b.ctx, b.cancel = context.WithCancel(context.Background())
		}
		b.exited = make(chan struct{})
		go b.work(d, b.exited)
	}
	b.mu.Unlock()
}

// work runs the queued jobs until none is left.
func (b *backlog) work(d *Deduper, exited chan struct{}) {
	defer close(exited)
	backoff := minBacklogBackoff
	for {
		b.mu.Lock()
		jobs := b.jobs
		b.jobs = nil
		if len(jobs) == 0 || b.closed {
			b.jobs = append(jobs, b.jobs...) // close counts what is left
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()

		left := b.runJobs(d, jobs)
		if len(left) == 0 {
			backoff = minBacklogBackoff
			continue
		}
		b.mu.Lock()
		b.jobs = append(left, b.jobs...)
		b.mu.Unlock()
		select {
		case <-b.ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBacklogBackoff)
	}
}

// backlogBatch bounds the jobs run at once: together, a batching store (the
// Redis and PostgreSQL ones) sends them in a few round trips, so a backlog
// built up during an outage drains in seconds after it.
const backlogBatch = 64

// runJobs runs jobs, backlogBatch at a time, and returns those left when
// some failed: the store is failing, so the rest waits for the next attempt.
func (b *backlog) runJobs(d *Deduper, jobs []job) []job {
	for len(jobs) > 0 {
		n := min(len(jobs), backlogBatch)
		failed := make([]bool, n)
		var wg sync.WaitGroup
		for i, j := range jobs[:n] {
			wg.Go(func() { failed[i] = !b.runJob(d, j) })
		}
		wg.Wait()
		var left []job
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
func (b *backlog) runJob(d *Deduper, j job) bool {
	if d.now().After(j.until) {
		j.finish(false)
		return true // a lease or TTL ran out meanwhile: nothing left to do
	}
	ctx, cancel := context.WithTimeout(b.ctx, backlogTimeout)
	defer cancel()
	err := j.do(ctx)
	switch {
	case err == nil:
		j.finish(true)
	case !ambiguous(err):
		j.finish(false)
		d.shared.counters.dropped.Add(1) // refused for good: closed store, invalid key
		d.logger.LogAttrs(ctx, slog.LevelWarn, "dedupe: backlog work refused by the store", slog.Any("error", err))
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
			return nil // empty, or closed: close counted what it dropped
		}
		select {
		case <-exited:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close stops the goroutine, waits for it, and counts the jobs left as
// dropped. It is idempotent.
func (b *backlog) close(cs *counters) {
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
	cs.dropped.Add(uint64(len(left)))
	for _, j := range left {
		j.finish(false)
	}
}

// pendingMarks holds the keys whose mark is queued in the backlog: processed,
// but not yet marked on the primary store. Do answers their copies as
// duplicates, so this process never runs them again, even once the claim's
// lease on an unreachable store has run out.
type pendingMarks struct {
	n  atomic.Int64 // len(m), read without the lock on the common path
	mu sync.Mutex
	m  map[Key]int
}

func (p *pendingMarks) add(k Key) {
	p.mu.Lock()
	if p.m == nil {
		p.m = make(map[Key]int)
	}
	p.m[k]++
	p.n.Add(1)
	p.mu.Unlock()
}

func (p *pendingMarks) remove(k Key) {
	p.mu.Lock()
	if p.m[k]--; p.m[k] <= 0 {
		delete(p.m, k)
	}
	p.n.Add(-1)
	p.mu.Unlock()
}

func (p *pendingMarks) has(k Key) bool {
	if p.n.Load() == 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[k] > 0
}
