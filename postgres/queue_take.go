package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe/queue"

	"github.com/jackc/pgx/v5"

	"github.com/gatewaykit/dedupe"
)

// Take waits for a visible row and hides it; see [queue.Queue]. It
// looks again every [QueueConfig.PollInterval], and at once when this
// process pushes or puts a message back.
func (q *Queue) Take(ctx context.Context) (queue.Delivery, error) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		q.mu.Lock()
		wake := q.wake
		q.mu.Unlock()
		d, ok, err := q.tryTake(ctx)
		if err != nil && q.check(context.Background()) != nil {
			return queue.Delivery{}, queue.ErrClosed // closed mid-call
		}
		if err != nil || ok {
			return d, err
		}
		timer.Reset(q.cfg.PollInterval)
		select {
		case <-wake:
			if !timer.Stop() {
				<-timer.C
			}
		case <-timer.C:
		case <-q.done:
			return queue.Delivery{}, queue.ErrClosed
		case <-ctx.Done():
			return queue.Delivery{}, ctx.Err()
		}
	}
}

// tryTake takes the first visible row, if there is one.
func (q *Queue) tryTake(ctx context.Context) (queue.Delivery, bool, error) {
	if err := q.check(ctx); err != nil {
		return queue.Delivery{}, false, err
	}
	q.sweep(ctx)
	receipt := queue.NewReceipt()
	var data []byte
	var attempts int
	err := q.pool.QueryRow(ctx, q.sql.take, receipt, q.cfg.Visibility.Microseconds()).Scan(&data, &attempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return queue.Delivery{}, false, nil
	}
	if err != nil {
		return queue.Delivery{}, false, queueErr("take", err)
	}
	d := queue.Delivery{Attempt: attempts, Receipt: receipt, Visibility: q.cfg.Visibility}
	if err := d.Message.UnmarshalBinary(data); err != nil {
		return queue.Delivery{}, false, queueErr("take", err)
	}
	return d, true, nil
}

// sweepEvery is the least time between two sweeps of settled rows.
const sweepEvery = time.Minute

// sweep deletes settled rows past the retention, at most once a minute.
// Its errors are left to the next sweep: the rows are invisible anyway.
func (q *Queue) sweep(ctx context.Context) {
	q.mu.Lock()
	due := time.Since(q.lastSweep) >= sweepEvery
	if due {
		q.lastSweep = time.Now()
	}
	q.mu.Unlock()
	if due {
		_, _ = q.pool.Exec(ctx, q.sql.sweep, q.cfg.Retention.Microseconds())
	}
}

// Update moves d on as c says; see [queue.Queue].
func (q *Queue) Update(ctx context.Context, d queue.Delivery, c queue.Change) error {
	if err := q.check(ctx); err != nil {
		return err
	}
	vis := q.cfg.Visibility
	var stmt string
	args := []any{d.ID, d.Receipt}
	switch c.State {
	case queue.StateProcessing:
		hidden := vis
		if c.After > 0 {
			hidden = min(c.After, vis)
		}
		stmt, args = q.sql.extend, append(args, hidden.Microseconds())
	case queue.StateQueued:
		uncount := 0
		if c.NotRun {
			uncount = 1
		}
		stmt, args = q.sql.requeue, append(args, min(max(c.After, 0), vis).Microseconds(), uncount)
	case queue.StateFailed:
		stmt, args = q.sql.fail, append(args, c.Reason)
	case queue.StateDone:
		stmt, args = q.sql.done, args[:1]
	default:
		return fmt.Errorf("dedupe: postgres queue: update to state %d", c.State)
	}
	tag, err := q.pool.Exec(ctx, stmt, args...)
	switch {
	case err != nil:
		return queueErr("update", err)
	case tag.RowsAffected() == 0 && c.State != queue.StateDone:
		return fmt.Errorf("%w: %s", queue.ErrStaleDelivery, d.ID)
	}
	if c.State == queue.StateQueued {
		q.wakeTakers()
	}
	return nil
}

// Status returns the state of the message with id; see [queue.Queue].
func (q *Queue) Status(ctx context.Context, id string) (queue.Entry, bool, error) {
	if err := q.check(ctx); err != nil {
		return queue.Entry{}, false, err
	}
	e, err := scanEntry(q.pool.QueryRow(ctx, q.sql.status, id, q.cfg.Retention.Microseconds()))
	if errors.Is(err, pgx.ErrNoRows) {
		return queue.Entry{}, false, nil
	}
	if err != nil {
		return queue.Entry{}, false, queueErr("status", err)
	}
	return e, true, nil
}

// scanEntry reads an entry from a row of the statements' entry columns.
func scanEntry(row pgx.Row) (queue.Entry, error) {
	var id, key, reason string
	var state int16
	var attempts int
	var accepted, updated time.Time
	if err := row.Scan(&id, &key, &state, &attempts, &accepted, &updated, &reason); err != nil {
		return queue.Entry{}, err
	}
	k, err := dedupe.ParseKey(key)
	if err != nil {
		return queue.Entry{}, err
	}
	return queue.Entry{ID: id, Key: k, State: queue.State(state), Attempts: attempts,
		Accepted: accepted, Updated: updated, Reason: reason}, nil
}

// Close wakes every Take with [queue.ErrClosed] and makes every
// later call fail with it. The rows stay; the pool stays open. It may be
// called more than once.
func (q *Queue) Close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.done)
	}
	return nil
}
