package dedupeotel

import (
	"context"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/batch"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// The batch calls of a Store ([dedupe.BatchStore]). A Store is a BatchStore
// whatever it wraps, so that a store wrapped by [NewStore] keeps the round
// trips of its own batch calls; for a store that has none, it makes the
// calls one key at a time, concurrently, as [dedupe.Deduper.DoEach] does for
// a store that is not a BatchStore, so that wrapping one changes neither
// what a batch does nor how fast.

var _ dedupe.BatchStore = (*Store)(nil)

// ClaimEach claims each of claims on the wrapped store, in a
// "dedupe.ClaimEach" span with the number of claims of each answer
// ([ClaimedCountKey], [DuplicateCountKey], [InFlightCountKey],
// [FailedCountKey]).
func (s *Store) ClaimEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) ([]dedupe.Status, []error) {
	key := func(n int) dedupe.Key { return claims[n].Key }
	ctx, span := s.startEach(ctx, "ClaimEach", "claim", len(claims), key)
	var status []dedupe.Status
	var errs []error
	if b, ok := s.st.(dedupe.BatchStore); ok {
		status, errs = b.ClaimEach(ctx, claims, lease)
	} else {
		status, errs = make([]dedupe.Status, len(claims)), make([]error, len(claims))
		batch.InOrder(len(claims), key, eachWidth, func(n int) {
			sctx, span := s.start(ctx, "claim", claims[n].Key)
			status[n], errs[n] = s.st.Claim(sctx, claims[n], lease)
			s.endClaim(span, claims[n].Key, status[n], errs[n])
		})
	}
	counts := make(map[dedupe.Status]int, 3)
	for n, st := range status {
		if n < len(errs) && errs[n] == nil {
			counts[st]++
		}
	}
	span.SetAttributes(ClaimedCountKey.Int(counts[dedupe.Claimed]), DuplicateCountKey.Int(counts[dedupe.Duplicate]),
		InFlightCountKey.Int(counts[dedupe.InFlight]))
	s.endEach(span, len(claims), errs, key)
	return status, errs
}

// ExtendEach extends the lease of each of claims on the wrapped store, in a
// "dedupe.ExtendEach" span.
func (s *Store) ExtendEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) []error {
	key := func(n int) dedupe.Key { return claims[n].Key }
	ctx, span := s.startEach(ctx, "ExtendEach", "extend", len(claims), key)
	var errs []error
	if b, ok := s.st.(dedupe.BatchStore); ok {
		errs = b.ExtendEach(ctx, claims, lease)
	} else {
		errs = s.perKey(ctx, "extend", len(claims), key, func(ctx context.Context, n int) error {
			return s.st.Extend(ctx, claims[n], lease)
		})
	}
	s.endEach(span, len(claims), errs, key)
	return errs
}

// ReleaseEach releases each of claims on the wrapped store, in a
// "dedupe.ReleaseEach" span.
func (s *Store) ReleaseEach(ctx context.Context, claims []dedupe.Claim) []error {
	key := func(n int) dedupe.Key { return claims[n].Key }
	ctx, span := s.startEach(ctx, "ReleaseEach", "release", len(claims), key)
	var errs []error
	if b, ok := s.st.(dedupe.BatchStore); ok {
		errs = b.ReleaseEach(ctx, claims)
	} else {
		errs = s.perKey(ctx, "release", len(claims), key, func(ctx context.Context, n int) error {
			return s.st.Release(ctx, claims[n])
		})
	}
	s.endEach(span, len(claims), errs, key)
	return errs
}

// MarkEach marks each of keys, with results[n] if results is not nil, on
// the wrapped store, in a "dedupe.MarkEach" span.
func (s *Store) MarkEach(ctx context.Context, keys []dedupe.Key, results [][]byte, ttl time.Duration) []error {
	key := func(n int) dedupe.Key { return keys[n] }
	ctx, span := s.startEach(ctx, "MarkEach", "mark", len(keys), key)
	var errs []error
	if b, ok := s.st.(dedupe.BatchStore); ok {
		errs = b.MarkEach(ctx, keys, results, ttl)
	} else if results != nil && len(results) != len(keys) {
		errs = make([]error, len(keys))
		for n := range errs {
			errs[n] = fmt.Errorf("%w: %d results for %d keys", dedupe.ErrInvalidKey, len(results), len(keys))
		}
	} else {
		errs = s.perKey(ctx, "mark", len(keys), key, func(ctx context.Context, n int) error {
			if results == nil || len(results[n]) == 0 {
				return s.st.Mark(ctx, keys[n], ttl)
			}
			return s.st.MarkResult(ctx, keys[n], results[n], ttl)
		})
	}
	s.endEach(span, len(keys), errs, key)
	return errs
}

// startEach starts the span of the batch call method (ClaimEach, ...), the
// operation op (claim, ...) on n items whose keys key gives: "dedupe."+method.
// Its db.operation.name is
// "BATCH claim" and db.operation.batch.size n, but for one item, whose call
// the semantic conventions name as a single one's (claim, no batch size).
func (s *Store) startEach(ctx context.Context, method, op string, n int, key func(int) dedupe.Key) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{s.system, BackendKey.String(s.st.Backend())}
	if n == 1 {
		attrs = append(attrs, semconv.DBOperationName(op))
	} else {
		attrs = append(attrs, semconv.DBOperationName("BATCH "+op), semconv.DBOperationBatchSize(n))
	}
	if ch, ok := oneChannel(n, key); ok {
		attrs = append(attrs, semconv.MessagingSystemKey.String(ch))
	}
	return s.cfg.tracer.Start(ctx, "dedupe."+method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// endEach ends the span of a batch call of n items that returned errs: it
// counts the items that failed ([FailedCountKey]) and, if some did, records
// the first one's error.
func (s *Store) endEach(span trace.Span, n int, errs []error, key func(int) dedupe.Key) {
	var failed []int
	for i, err := range errs {
		if err != nil && i < n {
			failed = append(failed, i)
		}
	}
	span.SetAttributes(FailedCountKey.Int(len(failed)))
	s.cfg.recordEachErrors(span, "items", n, failed, errs, key)
	span.End()
}

// perKey calls do for each of n items, a key each (key), one key at a time,
// concurrently, each call a child span "dedupe."+op of ctx's, and returns
// their errors.
func (s *Store) perKey(ctx context.Context, op string, n int, key func(int) dedupe.Key, do func(context.Context, int) error) []error {
	errs := make([]error, n)
	batch.InOrder(n, key, eachWidth, func(i int) {
		sctx, span := s.start(ctx, op, key(i))
		errs[i] = do(sctx, i)
		s.end(span, key(i), errs[i])
	})
	return errs
}

// eachWidth bounds the concurrent calls of batch.InOrder: the width of
// [dedupe.Deduper.DoEach]'s own calls to a store that is not a BatchStore.
const eachWidth = 64
