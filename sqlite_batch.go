package dedupe

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// sqliteOp is one write waiting for, or done by, the writer goroutine.
type sqliteOp struct {
	kind  sqliteOpKind
	state atomic.Int32
	done  chan struct{}

	key   Key
	d     time.Duration // ttl or lease
	token string
	cur   sqliteCursor // cleanup: where the scan of marks resumes

	// Results, valid once done is closed.
	status   Status
	n        int64
	finished bool
	err      error
}

type sqliteOpKind uint8

const (
	sqliteMark sqliteOpKind = iota + 1
	sqliteClaim
	sqliteExtend
	sqliteRelease
	sqliteCleanup
)

// States of a sqliteOp.
const (
	opQueued int32 = iota
	opRunning
	opCancelled
)

// submit queues op for the writer and waits for its result. A call whose
// context ends while op is still queued returns the context's error and op
// never runs; once the writer has started op, submit waits for its outcome,
// so an error always means that nothing was written.
func (s *SQLiteStore) submit(ctx context.Context, op *sqliteOp) error {
	op.done = make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, op)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	select {
	case <-op.done:
	case <-ctx.Done():
		if op.state.CompareAndSwap(opQueued, opCancelled) {
			return ctx.Err()
		}
		<-op.done
	}
	return op.err
}

// writer runs every write of the store, batching the operations queued while
// the previous transaction committed into the next one.
func (s *SQLiteStore) writer() {
	defer close(s.writerDone)
	for {
		select {
		case <-s.wake:
		case <-s.quit:
			// Close refuses new operations; finish those already queued.
			s.drain()
			return
		}
		s.drain()
	}
}

func (s *SQLiteStore) drain() {
	for {
		// Only the writer touches spare: the queue's previous backing array.
		s.mu.Lock()
		ops := s.queue
		s.queue = s.spare[:0]
		s.mu.Unlock()
		if len(ops) == 0 {
			s.spare = ops
			return
		}
		for rest := ops; len(rest) > 0; {
			n := min(len(rest), sqliteMaxBatch)
			s.runBatch(rest[:n])
			rest = rest[n:]
		}
		clear(ops)
		s.spare = ops[:0]
	}
}

// runBatch runs ops in one transaction and reports each its result once the
// transaction committed.
func (s *SQLiteStore) runBatch(ops []*sqliteOp) {
	ctx := context.Background()
	// The connection's own busy timeout waits up to sqliteBusySlice in each
	// try; retry, within the store's busy timeout, unless every caller gave up.
	if err := s.retryBusy(ctx, func() bool { return allCancelled(ops) }, func() error {
		_, err := s.stmt.begin.ExecContext(ctx)
		return err
	}); err != nil {
		err = sqliteError("begin", err, s.busy)
		for _, op := range ops {
			if op.state.CompareAndSwap(opQueued, opRunning) {
				op.err = err
				close(op.done)
			}
		}
		return
	}
	now := s.now()
	running := ops[:0:0]
	var lost error // the transaction was rolled back under us
	for _, op := range ops {
		if !op.state.CompareAndSwap(opQueued, opRunning) {
			continue // cancelled while queued
		}
		running = append(running, op)
		if lost != nil {
			continue
		}
		if err := s.apply(ctx, op, now); err != nil {
			op.err = err
			if errors.Is(err, errSQLiteTxLost) {
				lost = err
			}
		}
	}
	if lost == nil {
		if err := s.retryBusy(ctx, nil, func() error {
			// A busy COMMIT (readers of a rollback journal) leaves the transaction open.
			_, err := s.stmt.commit.ExecContext(ctx)
			return err
		}); err != nil {
			lost = sqliteError("commit", err, s.busy)
		}
	}
	if lost != nil {
		_, _ = s.stmt.rollback.ExecContext(ctx)
		for _, op := range running {
			op.status, op.token, op.n, op.finished = 0, "", 0, false
			op.err = lost
		}
	}
	for _, op := range running {
		close(op.done)
	}
}

// errSQLiteTxLost marks an error after which SQLite rolled back the whole
// transaction.
var errSQLiteTxLost = errors.New("dedupe: sqlite: transaction rolled back")

func allCancelled(ops []*sqliteOp) bool {
	for _, op := range ops {
		if op.state.Load() == opQueued {
			return false
		}
	}
	return true
}

// apply runs op inside the open transaction. An operation of several writes
// runs in a savepoint, so that it takes effect whole or not at all.
func (s *SQLiteStore) apply(ctx context.Context, op *sqliteOp, now time.Time) error {
	switch op.kind {
	case sqliteMark, sqliteCleanup:
		if _, err := s.stmt.savepoint.ExecContext(ctx); err != nil {
			return txErr("savepoint", err, s.busy)
		}
		var err error
		if op.kind == sqliteMark {
			err = s.applyMark(ctx, op, now)
		} else {
			err = s.applyCleanup(ctx, op, now)
		}
		if err != nil {
			if _, rerr := s.stmt.rollbackTo.ExecContext(ctx); rerr != nil {
				return fmt.Errorf("%w: %w", errSQLiteTxLost, err)
			}
		}
		if _, rerr := s.stmt.release.ExecContext(ctx); rerr != nil {
			return fmt.Errorf("%w: %w", errSQLiteTxLost, sqliteError("release savepoint", rerr, s.busy))
		}
		return err
	case sqliteClaim:
		return s.applyClaim(ctx, op, now)
	case sqliteExtend, sqliteRelease:
		return s.applyOwned(ctx, op, now)
	}
	return fmt.Errorf("dedupe: sqlite: unknown operation %d", op.kind)
}

func txErr(what string, err error, busy time.Duration) error {
	return fmt.Errorf("%w: %w", errSQLiteTxLost, sqliteError(what, err, busy))
}

func (s *SQLiteStore) applyMark(ctx context.Context, op *sqliteOp, now time.Time) error {
	dkey := op.key.String()
	if _, err := s.stmt.claimDelete.ExecContext(ctx, dkey); err != nil {
		return sqliteError("mark", err, s.busy)
	}
	created := formatSQLiteTime(now, s.loc)
	expires := formatSQLiteTime(now.Add(op.d), s.loc)
	if _, err := s.stmt.markUpsert.ExecContext(ctx, dkey, op.key.Channel, op.key.MessageID, created, expires); err != nil {
		return sqliteError("mark", err, s.busy)
	}
	return nil
}

// marked reports whether dkey has an unexpired mark.
func (s *SQLiteStore) marked(ctx context.Context, dkey string, now time.Time) (bool, error) {
	var exp sql.NullString
	err := s.stmt.markGet.QueryRowContext(ctx, dkey).Scan(&exp)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return sqliteLive(exp, now, s.loc), nil
}

func (s *SQLiteStore) applyClaim(ctx context.Context, op *sqliteOp, now time.Time) error {
	dkey := op.key.String()
	dup, err := s.marked(ctx, dkey, now)
	if err != nil {
		return sqliteError("claim", err, s.busy)
	}
	if dup {
		op.status = Duplicate
		return nil
	}
	tok := s.newToken()
	res, err := s.stmt.claimTake.ExecContext(ctx, dkey, tok, now.Add(op.d).UnixNano(), now.UnixNano())
	if err != nil {
		return sqliteError("claim", err, s.busy)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		op.status, op.token = Claimed, tok
	} else {
		op.status = InFlight
	}
	return nil
}

func (s *SQLiteStore) applyOwned(ctx context.Context, op *sqliteOp, now time.Time) error {
	what := "release"
	if op.kind == sqliteExtend {
		what = "extend"
	}
	dkey := op.key.String()
	dup, err := s.marked(ctx, dkey, now)
	if err != nil {
		return sqliteError(what, err, s.busy)
	}
	if dup {
		return fmt.Errorf("%w: %s is marked", ErrNotOwner, op.key)
	}
	var res sql.Result
	if op.kind == sqliteExtend {
		res, err = s.stmt.claimExtend.ExecContext(ctx, now.Add(op.d).UnixNano(), dkey, op.token, now.UnixNano())
	} else {
		res, err = s.stmt.claimDrop.ExecContext(ctx, dkey, op.token, now.UnixNano())
	}
	if err != nil {
		return sqliteError(what, err, s.busy)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("%w: %s", ErrNotOwner, op.key)
	}
	return nil
}
