package dedupe

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// The group-commit writer: every write of a store is a call queued for one
// goroutine, which runs the calls waiting at that moment in one transaction
// and gives each its own outcome once the transaction has ended. This is
// bbolt's DB.Batch, with a savepoint instead of a retry to isolate a failing
// call, and with callers that may give up while queued.

// sqliteWrite is the work of one call, run in the writer's open transaction;
// now is the batch's time. ctx is the writer's own: a caller's context does
// not interrupt a write once it has started.
type sqliteWrite func(ctx context.Context, now time.Time) error

// sqliteCall is one write queued for the writer: fn, and err, which receives
// fn's outcome once the transaction it ran in has ended.
type sqliteCall struct {
	fn    sqliteWrite
	err   chan error   // buffered: the writer never waits for the caller
	state atomic.Int32 // callQueued, then callRunning or callCancelled
}

// States of a sqliteCall. The writer runs only a call it moves from queued to
// running; a caller that moves it to cancelled returns at once.
const (
	callQueued int32 = iota
	callRunning
	callCancelled
)

// sqliteMaxBatch bounds the calls of one group-commit transaction.
const sqliteMaxBatch = 128

// sqliteQueue holds the calls waiting for the writer goroutine.
type sqliteQueue struct {
	mu    sync.Mutex
	calls []*sqliteCall
	spare []*sqliteCall // the previous backing array of calls; only the writer touches it
	wake  chan struct{} // a call was queued
	quit  chan struct{} // closed by Close
	done  chan struct{} // closed when the writer has returned
}

// errSQLiteTxLost marks an error after which SQLite rolled back the whole
// transaction, so that every call in it fails.
var errSQLiteTxLost = errors.New("transaction rolled back")

// submit queues fn for the writer and waits for its outcome. A call whose
// context ends while fn is still queued returns the context's error and fn
// never runs; once the writer has started fn, submit waits for its outcome,
// so an error always means that nothing was written. A failure is returned
// as the failure of op on subject.
func (s *SQLiteStore) submit(ctx context.Context, op, subject string, fn sqliteWrite) error {
	if s.readOnly {
		return fmt.Errorf("dedupe: sqlite: %s %s: %w", op, subject, ErrReadOnly)
	}
	c := &sqliteCall{fn: fn, err: make(chan error, 1)}
	q := &s.queue
	q.mu.Lock()
	if s.closed.Load() {
		q.mu.Unlock()
		return ErrClosed
	}
	q.calls = append(q.calls, c)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	var err error
	select {
	case err = <-c.err:
	case <-ctx.Done():
		if c.state.CompareAndSwap(callQueued, callCancelled) {
			return ctx.Err()
		}
		err = <-c.err
	}
	if err != nil {
		return s.fail(op, subject, err)
	}
	return nil
}

// writer runs every write of the store until Close, batching the calls
// queued while the previous transaction committed into the next one.
func (s *SQLiteStore) writer() {
	q := &s.queue
	defer close(q.done)
	for {
		select {
		case <-q.wake:
			s.drain()
		case <-q.quit:
			// Close refuses new calls; finish those already queued.
			s.drain()
			return
		}
	}
}

// drain runs the queued calls, at most sqliteMaxBatch per transaction, until
// the queue is empty.
func (s *SQLiteStore) drain() {
	q := &s.queue
	for {
		q.mu.Lock()
		calls := q.calls
		q.calls = q.spare[:0]
		q.mu.Unlock()
		if len(calls) == 0 {
			q.spare = calls
			return
		}
		for rest := calls; len(rest) > 0; {
			n := min(len(rest), sqliteMaxBatch)
			s.runBatch(rest[:n])
			rest = rest[n:]
		}
		clear(calls)
		q.spare = calls[:0]
	}
}

// runBatch runs calls, at most sqliteMaxBatch, in one transaction, skipping
// those cancelled while queued, and gives each the outcome of its write once
// the transaction has ended. A write that fails fails its call alone; if the
// transaction cannot begin or commit, or SQLite rolls it back, every call
// that ran fails with that error.
func (s *SQLiteStore) runBatch(calls []*sqliteCall) {
	ctx := context.Background()
	if err := s.retryBusy(ctx, func() bool { return allCancelled(calls) }, func() error {
		_, err := s.stmt.begin.ExecContext(ctx)
		return err
	}); err != nil {
		err = fmt.Errorf("begin: %w", err)
		for _, c := range calls {
			if c.state.CompareAndSwap(callQueued, callRunning) {
				c.err <- err
			}
		}
		return
	}
	now := s.now()
	running := calls[:0]           // compacted in place
	var errs [sqliteMaxBatch]error // errs[i] is the outcome of running[i]
	var lost error
	for _, c := range calls {
		if !c.state.CompareAndSwap(callQueued, callRunning) {
			continue // cancelled while queued
		}
		running = append(running, c)
		if lost != nil {
			continue
		}
		err := c.fn(ctx, now)
		errs[len(running)-1] = err
		if errors.Is(err, errSQLiteTxLost) {
			lost = err
		}
	}
	if lost == nil {
		if err := s.retryBusy(ctx, nil, func() error {
			// A busy COMMIT (readers of a rollback journal) leaves the transaction open.
			_, err := s.stmt.commit.ExecContext(ctx)
			return err
		}); err != nil {
			lost = fmt.Errorf("commit: %w", err)
		}
	}
	if lost != nil {
		_, _ = s.stmt.rollback.ExecContext(ctx)
	}
	for i, c := range running {
		if lost != nil {
			errs[i] = lost
		}
		c.err <- errs[i]
	}
}

// allCancelled reports whether every call was cancelled while queued.
func allCancelled(calls []*sqliteCall) bool {
	for _, c := range calls {
		if c.state.Load() == callQueued {
			return false
		}
	}
	return true
}

// inSavepoint runs write, a write of several statements, in a savepoint, so
// that it takes effect whole or not at all and its failure fails its call
// alone.
func (s *SQLiteStore) inSavepoint(ctx context.Context, write func() error) error {
	if _, err := s.stmt.savepoint.ExecContext(ctx); err != nil {
		return fmt.Errorf("%w: savepoint: %w", errSQLiteTxLost, err)
	}
	err := write()
	if err != nil {
		if _, rerr := s.stmt.rollbackTo.ExecContext(ctx); rerr != nil {
			return fmt.Errorf("%w: %w", errSQLiteTxLost, err)
		}
	}
	if _, rerr := s.stmt.release.ExecContext(ctx); rerr != nil {
		return fmt.Errorf("%w: release savepoint: %w", errSQLiteTxLost, rerr)
	}
	return err
}
