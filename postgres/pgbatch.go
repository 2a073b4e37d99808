package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/gatewaykit/dedupe/internal/batch"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// roundsInFlight is how many batches a Store has in flight at most, each on
// a connection of its own and in a transaction of its own. Two keep the
// batches full, and so the commits few: a call that finds a batch free is
// sent at once, alone, so more batches in flight mean more of them carrying
// one or two calls under load. Measured with 64 callers of Claim then Mark
// (issue 22, item 7): 11.3 calls a batch with 4 in flight, 24.7 with 2
// (batch.Batcher's gather on; the hand-gathered ceiling of 2 goroutines x 32
// keys is 32). A batch that stops answering holds up only its own calls.
const roundsInFlight = 2

// pgBatch is the request of one round trip: a pgx.Batch, and its results once
// sent.
type pgBatch struct {
	pgx.Batch
	results pgx.BatchResults
}

// send runs calls as one batch: one round trip, and one transaction, since
// pgx sends a batch with a single Sync. The statements run in the order of
// their keys, so that concurrent batches (of this store or of other
// instances) take their row locks in one order and never deadlock; calls on
// the same key keep their order, so a second Claim of a key in a batch sees
// the first, as it would in the next batch.
//
// If a statement fails, the server rolls the whole transaction back, and
// nothing of the batch was written. The calls are then sent again one by one,
// each in a transaction of its own, so that only the failing call fails; the
// calls whose callers gave up meanwhile are not sent again. Any other error
// (the connection failed, the context ended) may have come after the commit:
// every call gets it, and may have taken effect.
func (s *Store) send(r *batch.Round, calls []*batch.Call[*pgBatch]) {
	if len(calls) > 1 {
		slices.SortStableFunc(calls, func(a, b *batch.Call[*pgBatch]) int { return strings.Compare(a.Key(), b.Key()) })
	}
	err := s.sendBatch(r.Context(), calls)
	if err == nil || len(calls) == 1 || !rolledBack(err) {
		for _, c := range calls {
			c.Answer(err)
		}
		return
	}
	s.log.Debug(msgOneByOne, "table", s.table, "calls", len(calls), "error", err)
	for _, c := range calls {
		if c.Sent() {
			c.Answer(s.sendBatch(r.Context(), []*batch.Call[*pgBatch]{c}))
		}
	}
}

// sendBatch sends calls in one batch, reads the outcome of each, and returns
// the first error.
func (s *Store) sendBatch(ctx context.Context, calls []*batch.Call[*pgBatch]) error {
	p := &pgBatch{}
	reads := make([]func() error, len(calls))
	for i, c := range calls {
		reads[i] = c.Queue(p)
	}
	p.results = s.pool.SendBatch(ctx, &p.Batch)
	var first error
	for _, read := range reads {
		if err := read(); err != nil && first == nil {
			first = err
		}
	}
	if err := p.results.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// rolledBack reports whether err is the server's report of a statement that
// failed, after which it rolled the transaction back: an ERROR, not a FATAL
// that ends the connection, after which nothing is known.
func rolledBack(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	if pgErr.SeverityUnlocalized != "" {
		return pgErr.SeverityUnlocalized == "ERROR"
	}
	return pgErr.Severity == "ERROR"
}
