package dedupeotel

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gatewaykit/dedupe"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Store is a [dedupe.Store] whose every call is a client span, as redisotel
// makes each Redis command one (github.com/redis/go-redis/extra/redisotel,
// tracing.go): "dedupe.claim", "dedupe.mark", "dedupe.release",
// "dedupe.extend", "dedupe.exists", "dedupe.result" and "dedupe.forget", with the attributes db.system.name
// (redis, postgresql, sqlite, or the backend's name), db.operation.name,
// dedupe.store.backend, messaging.system (the key's channel),
// messaging.message.id (masked by [WithMask]), dedupe.claim.status for
// a claim, and error.type with an error status when the call fails.
//
// Under a [Deduper]'s Do span or a [Handler]'s delivery span, a claim that
// finds the message in flight starts a wait: one "dedupe.wait" span, from
// the end of that claim to the end of the one that ended the wait, or to the
// end of the Do, holds the claims asked again while the Deduper waits
// ([dedupe.WithWait]) as their number ([WaitPollsKey]); only the last of them
// is a span, a child of the wait's.
//
// A Store is also a [dedupe.BatchStore], for [dedupe.Deduper.DoEach]: each
// batch call is one client span, "dedupe.ClaimEach", "dedupe.ExtendEach",
// "dedupe.ReleaseEach" or "dedupe.MarkEach", with db.operation.name "BATCH
// claim" (and so on) and db.operation.batch.size (the number of items; for
// one item, the single call's name and no size, as the semantic conventions
// ask), messaging.system when every item has the same channel, the number of
// items that failed ([FailedCountKey]) and for a claim of each answer
// ([ClaimedCountKey], ...); a call with a failed item has an error status
// and records the first one's error. No message id is named: a batch has
// many. A wrapped store that is a BatchStore makes the batch call in its
// round trips; one that is not is called one key at a time, concurrently,
// exactly as DoEach calls a store that is not a BatchStore, each call a
// child span of the batch's ("dedupe.claim", ...). One type for both, rather
// than a wrapper of each kind, keeps [NewStore]'s signature, and so every
// store wrapped by it keeps its batch round trips, while a store without
// them is not made slower by a wrapper that would call it serially.
//
// Wrap the store a [dedupe.Deduper] is given, or the last layer of a
// [dedupe.LayeredStore] (the shared store, whose round trips are the ones
// worth tracing): a wrapped LayeredStore no longer tells the Deduper which
// layer decided, and a wrapped front layer ignores a TTL shorter than its
// own window. A Store is safe for concurrent use if the store it wraps is.
type Store struct {
	st     dedupe.Store
	cfg    *config
	system attribute.KeyValue
}

var (
	_ dedupe.Store     = (*Store)(nil)
	_ dedupe.Forgetter = (*Store)(nil)
)

// NewStore returns st with its calls traced.
func NewStore(st dedupe.Store, opts ...Option) *Store {
	return &Store{st: st, cfg: newConfig(opts), system: dbSystem(st.Backend())}
}

// dbSystem returns the db.system.name of a backend.
func dbSystem(backend string) attribute.KeyValue {
	switch backend {
	case "redis":
		return semconv.DBSystemNameRedis
	case "postgres":
		return semconv.DBSystemNamePostgreSQL
	case "sqlite":
		return semconv.DBSystemNameSQLite
	}
	return semconv.DBSystemNameKey.String(backend)
}

// Unwrap returns the store s wraps.
func (s *Store) Unwrap() dedupe.Store { return s.st }

// start starts the span of the call op on key.
func (s *Store) start(ctx context.Context, op string, key dedupe.Key, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	attrs := append(s.cfg.keyAttrs(key), s.system,
		semconv.DBOperationName(op), BackendKey.String(s.st.Backend()))
	opts = append(opts, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return s.cfg.tracer.Start(ctx, "dedupe."+op, opts...)
}

// end ends the span of a call on key, failed if err is not nil.
func (s *Store) end(span trace.Span, key dedupe.Key, err error, opts ...trace.SpanEndOption) {
	if err != nil {
		s.cfg.recordError(span, key, err)
	}
	span.End(opts...)
}

// Exists asks the wrapped store, in a "dedupe.exists" span.
func (s *Store) Exists(ctx context.Context, key dedupe.Key) (bool, error) {
	ctx, span := s.start(ctx, "exists", key)
	ok, err := s.st.Exists(ctx, key)
	span.SetAttributes(attribute.Bool("dedupe.exists", ok))
	s.end(span, key, err)
	return ok, err
}

// Mark marks key on the wrapped store, in a "dedupe.mark" span.
func (s *Store) Mark(ctx context.Context, key dedupe.Key, ttl time.Duration) error {
	ctx, span := s.start(ctx, "mark", key)
	err := s.st.Mark(ctx, key, ttl)
	s.end(span, key, err)
	return err
}

// Claim claims c on the wrapped store, in a "dedupe.claim" span; while a Do
// waits for an in-flight copy, under the wait's span, which counts the
// claims and makes a span of the last one only.
func (s *Store) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	cl := callFrom(ctx)
	if wctx, waiting := cl.polling(ctx, s.cfg.tracer); waiting {
		start := time.Now()
		status, err := s.st.Claim(wctx, c, lease)
		cl.polled(poll{s: s, key: c.Key, start: start, end: time.Now(), status: status, err: err})
		return status, err
	}
	sctx, span := s.start(ctx, "claim", c.Key)
	status, err := s.st.Claim(sctx, c, lease)
	s.endClaim(span, c.Key, status, err)
	cl.afterClaim(status, err)
	return status, err
}

// endClaim ends the span of a claim on key that answered status, or err.
func (s *Store) endClaim(span trace.Span, key dedupe.Key, status dedupe.Status, err error, opts ...trace.SpanEndOption) {
	if err == nil {
		span.SetAttributes(ClaimStatusKey.String(status.String()))
	}
	s.end(span, key, err, opts...)
}

// pollSpan makes, once it returned, the span of a claim asked during a
// wait: the wait's last, under the wait's span ctx carries.
func (s *Store) pollSpan(ctx context.Context, p poll) {
	_, span := s.start(ctx, "claim", p.key, trace.WithTimestamp(p.start))
	s.endClaim(span, p.key, p.status, p.err, trace.WithTimestamp(p.end))
}

// MarkResult marks key on the wrapped store with result, in a "dedupe.mark"
// span.
func (s *Store) MarkResult(ctx context.Context, key dedupe.Key, result []byte, ttl time.Duration) error {
	ctx, span := s.start(ctx, "mark", key)
	err := s.st.MarkResult(ctx, key, result, ttl)
	s.end(span, key, err)
	return err
}

// Result reads the result kept with key's mark on the wrapped store, in a
// "dedupe.result" span.
func (s *Store) Result(ctx context.Context, key dedupe.Key) ([]byte, bool, error) {
	ctx, span := s.start(ctx, "result", key)
	res, ok, err := s.st.Result(ctx, key)
	span.SetAttributes(attribute.Bool("dedupe.exists", ok))
	s.end(span, key, err)
	return res, ok, err
}

// Extend extends c's lease on the wrapped store, in a "dedupe.extend" span.
func (s *Store) Extend(ctx context.Context, c dedupe.Claim, lease time.Duration) error {
	ctx, span := s.start(ctx, "extend", c.Key)
	err := s.st.Extend(ctx, c, lease)
	s.end(span, c.Key, err)
	return err
}

// Release releases c on the wrapped store, in a "dedupe.release" span.
func (s *Store) Release(ctx context.Context, c dedupe.Claim) error {
	ctx, span := s.start(ctx, "release", c.Key)
	err := s.st.Release(ctx, c)
	s.end(span, c.Key, err)
	return err
}

// Forget forgets key's mark on the wrapped store, in a "dedupe.forget" span
// whose dedupe.forgotten attribute says whether a live mark was dropped; see
// [dedupe.Forgetter]. A wrapped store that is not a Forgetter fails with
// [errors.ErrUnsupported], without a span.
func (s *Store) Forget(ctx context.Context, key dedupe.Key) (bool, error) {
	f, ok := s.st.(dedupe.Forgetter)
	if !ok {
		return false, fmt.Errorf("dedupeotel: forget %s: the %s store cannot forget: %w", key, s.st.Backend(), errors.ErrUnsupported)
	}
	ctx, span := s.start(ctx, "forget", key)
	forgotten, err := f.Forget(ctx, key)
	span.SetAttributes(attribute.Bool("dedupe.forgotten", forgotten))
	s.end(span, key, err)
	return forgotten, err
}

// Backend returns the wrapped store's backend.
func (s *Store) Backend() string { return s.st.Backend() }

// Close closes the wrapped store.
func (s *Store) Close() error { return s.st.Close() }

// MinLease returns the wrapped store's MinLease, or 0 if it has none, so
// that [dedupe.New] still warns of a lease shorter than a Redis Cluster's
// failover.
func (s *Store) MinLease() time.Duration {
	if m, ok := s.st.(dedupe.MinLeaser); ok {
		return m.MinLease()
	}
	return 0
}

// Answered returns the wrapped store's Answered counts (a
// [dedupe.LayeredStore]'s), or nil, so that [dedupe.Deduper.Stats] still
// reports its layers.
func (s *Store) Answered() map[string]uint64 {
	if a, ok := s.st.(interface{ Answered() map[string]uint64 }); ok {
		return a.Answered()
	}
	return nil
}
