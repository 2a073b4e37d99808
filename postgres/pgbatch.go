package postgres

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/gatewaykit/dedupe/batch"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// roundsInFlight is how many batches a Store has in flight at most, each on
// a connection of its own and in a transaction of its own. Fewer batches in
// flight make fuller batches and fewer commits: with 64 callers of Claim then
// Mark, 24.7 calls a batch with two against 11.3 with four. On a quiet 2-core
// server (8 interleaved runs, issue 22 item 7) the store reached a median 0.80
// of the hand-gathered ceiling with two, 0.76 with one and 0.61 with four;
// under heavy load (20-30 on 2 cores) two and four were within the noise. A
// batch that stops answering holds up only its own calls.
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
