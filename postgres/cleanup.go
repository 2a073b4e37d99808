package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
)

// CleanupExpired deletes the expired marks and claims and returns how many it
// deleted. It deletes at most [Config.CleanupBatch] rows per statement, oldest
// expiry first by the expiry index, each statement its own short transaction,
// and stops after a batch that was not full. Rows locked by another cleanup
// are skipped, so instances sharing the table may all run it. Expired rows are
// already absent to every other method; CleanupExpired only reclaims their
// space.
//
// On the partitioned layout ([Config.Partitioned]) CleanupExpired instead
// detaches and drops the partitions whose range of expiry has passed on the
// server's clock, so that every row in them has expired, and returns the
// number of rows they held (counted in a partition of up to 16 MB; above
// that, the estimate of the table statistics that autovacuum keeps, so that
// a day's partition is not read in full before it is dropped); then it
// creates the partitions ahead. An expired row stays until its partition's
// range has passed, at most [Config.PartitionSpan] after its expiry.
// Instances sharing the table skip the drops while one of them makes them.
//
// If ctx ends or a statement fails, CleanupExpired returns the rows deleted so
// far with the error.
func (s *Store) CleanupExpired(ctx context.Context) (int64, error) {
	if s.closed.Load() {
		return 0, dedupe.ErrClosed
	}
	if s.ro {
		return 0, fmt.Errorf("dedupe: postgres: cleanup %s: %w", s.table, dedupe.ErrReadOnly)
	}
	return s.cleanup(ctx)
}

func (s *Store) cleanup(ctx context.Context) (int64, error) {
	if s.part != nil {
		return s.cleanupPartitions(ctx)
	}
	var total int64
	for {
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("dedupe: postgres: cleanup %s: %w", s.table, err)
		}
		tag, err := s.pool.Exec(ctx, s.sql.cleanup, s.batch)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
				err = fmt.Errorf("%w: %w", cerr, err)
			}
			return total, fmt.Errorf("dedupe: postgres: cleanup %s: %w", s.table, err)
		}
		n := tag.RowsAffected()
		total += n
		if n < int64(s.batch) {
			return total, nil
		}
	}
}

// sweep runs cleanup every interval until ctx is cancelled by Close.
func (s *Store) sweep(ctx context.Context, every time.Duration) {
	defer close(s.done)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		n, err := s.cleanup(ctx)
		switch {
		case err == nil:
			s.log.Debug(msgSweep, "table", s.table, "deleted", n)
		case ctx.Err() == nil:
			s.log.Warn("dedupe: postgres: background cleanup failed", "table", s.table, "deleted", n, "error", err)
		}
	}
}

// cleanupPartitions drops the expired partitions and creates the partitions
// ahead.
func (s *Store) cleanupPartitions(ctx context.Context) (int64, error) {
	n, err := s.part.drop(ctx, s.pool)
	if err == nil {
		err = s.part.add(ctx, s.pool, s.part.ahead)
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = fmt.Errorf("%w: %w", cerr, err)
		}
		return n, fmt.Errorf("dedupe: postgres: cleanup %s: %w", s.table, err)
	}
	return n, nil
}
