package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gatewaykit/dedupe/queue"
)

// pushBounded is Push under [QueueConfig.MaxDepth]: in one transaction
// holding an advisory lock that every bounded push of the table takes, so
// that the count of live rows it checks cannot change before it inserts.
func (q *Queue) pushBounded(ctx context.Context, m queue.Message, data []byte) (string, bool, error) {
	var id string
	var added bool
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, q.sql.lockKey+":push"); err != nil {
			return err
		}
		var live, mine int
		if err := tx.QueryRow(ctx, q.sql.depth, m.Key.String()).Scan(&live, &mine); err != nil {
			return err
		}
		if mine == 0 && live >= q.cfg.MaxDepth {
			return queue.ErrFull
		}
		return tx.QueryRow(ctx, q.sql.push, m.ID, m.Key.String(), data).Scan(&id, &added)
	})
	if err != nil {
		return "", false, queueErr("push", err)
	}
	if added {
		q.wakeTakers()
	}
	return id, added, nil
}

// Count returns the live rows and the failed ones kept; see [queue.Queue].
func (q *Queue) Count(ctx context.Context) (queue.Counts, error) {
	if err := q.check(ctx); err != nil {
		return queue.Counts{}, err
	}
	var c queue.Counts
	if err := q.pool.QueryRow(ctx, q.sql.count, q.cfg.Retention.Microseconds()).Scan(&c.Live, &c.Failed); err != nil {
		return queue.Counts{}, queueErr("count", err)
	}
	return c, nil
}

// Failed returns the latest failed messages; see [queue.Queue].
func (q *Queue) Failed(ctx context.Context, limit int) ([]queue.Entry, error) {
	if err := q.check(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = queue.DefaultFailedLimit
	}
	rows, err := q.pool.Query(ctx, q.sql.failed, q.cfg.Retention.Microseconds(), limit)
	if err != nil {
		return nil, queueErr("failed", err)
	}
	defer rows.Close()
	var out []queue.Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, queueErr("failed", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, queueErr("failed", err)
	}
	return out, nil
}

// Requeue puts the failed row with id back; see [queue.Queue].
func (q *Queue) Requeue(ctx context.Context, id string) (bool, error) {
	if err := q.check(ctx); err != nil {
		return false, err
	}
	tag, err := q.pool.Exec(ctx, q.sql.revive, id, q.cfg.Retention.Microseconds())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" { // its key became live meanwhile
		return false, nil
	}
	if err != nil {
		return false, queueErr("requeue", err)
	}
	if tag.RowsAffected() == 1 {
		q.wakeTakers()
	}
	return tag.RowsAffected() == 1, nil
}
