package dedupeotel

import (
	"context"
	"time"

	"github.com/gatewaykit/dedupe"
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Store is a [dedupe.Store] whose every call is a client span, as redisotel
// makes each Redis command one (github.com/redis/go-redis/extra/redisotel,
// tracing.go): "dedupe.claim", "dedupe.mark", "dedupe.release",
// "dedupe.extend", "dedupe.exists" and "dedupe.result", with the attributes db.system.name
// (redis, postgresql, sqlite, or the backend's name), db.operation.name,
// dedupe.store.backend, messaging.system (the key's channel),
// messaging.message.id (unless [WithoutMessageID]), dedupe.claim.status for
// a claim, and error.type with an error status when the call fails.
//
// Under a [Deduper]'s Do span or a [Handler]'s delivery span, a claim that
// finds the message in flight starts a wait: the claims asked again while
// the Deduper waits ([dedupe.WithWait]) are children of a "dedupe.wait" span,
// which runs from the end of the first claim to the end of the one that
// ended the wait, or to the end of the Do.
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

var _ dedupe.Store = (*Store)(nil)

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
func (s *Store) start(ctx context.Context, op string, key dedupe.Key) (context.Context, trace.Span) {
	attrs := append(s.cfg.keyAttrs(key), s.system,
		semconv.DBOperationName(op), BackendKey.String(s.st.Backend()))
	return s.cfg.tracer.Start(ctx, "dedupe."+op,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
}

// end ends span, failed if err is not nil.
func end(span trace.Span, err error) {
	if err != nil {
		recordError(span, err)
	}
	span.End()
}

// Exists asks the wrapped store, in a "dedupe.exists" span.
func (s *Store) Exists(ctx context.Context, key dedupe.Key) (bool, error) {
	ctx, span := s.start(ctx, "exists", key)
	ok, err := s.st.Exists(ctx, key)
	span.SetAttributes(attribute.Bool("dedupe.exists", ok))
	end(span, err)
	return ok, err
}

// Mark marks key on the wrapped store, in a "dedupe.mark" span.
func (s *Store) Mark(ctx context.Context, key dedupe.Key, ttl time.Duration) error {
	ctx, span := s.start(ctx, "mark", key)
	err := s.st.Mark(ctx, key, ttl)
	end(span, err)
	return err
}

// Claim claims c on the wrapped store, in a "dedupe.claim" span (a child of
// the wait span while a Do waits for an in-flight copy).
func (s *Store) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	cl := callFrom(ctx)
	sctx, span := s.start(cl.beforeClaim(ctx, s.cfg.tracer), "claim", c.Key)
	status, err := s.st.Claim(sctx, c, lease)
	if err == nil {
		span.SetAttributes(ClaimStatusKey.String(status.String()))
	}
	end(span, err)
	cl.afterClaim(status, err)
	return status, err
}

// MarkResult marks key on the wrapped store with result, in a "dedupe.mark"
// span.
func (s *Store) MarkResult(ctx context.Context, key dedupe.Key, result []byte, ttl time.Duration) error {
	ctx, span := s.start(ctx, "mark", key)
	err := s.st.MarkResult(ctx, key, result, ttl)
	end(span, err)
	return err
}

// Result reads the result kept with key's mark on the wrapped store, in a
// "dedupe.result" span.
func (s *Store) Result(ctx context.Context, key dedupe.Key) ([]byte, bool, error) {
	ctx, span := s.start(ctx, "result", key)
	res, ok, err := s.st.Result(ctx, key)
	span.SetAttributes(attribute.Bool("dedupe.exists", ok))
	end(span, err)
	return res, ok, err
}

// Extend extends c's lease on the wrapped store, in a "dedupe.extend" span.
func (s *Store) Extend(ctx context.Context, c dedupe.Claim, lease time.Duration) error {
	ctx, span := s.start(ctx, "extend", c.Key)
	err := s.st.Extend(ctx, c, lease)
	end(span, err)
	return err
}

// Release releases c on the wrapped store, in a "dedupe.release" span.
func (s *Store) Release(ctx context.Context, c dedupe.Claim) error {
	ctx, span := s.start(ctx, "release", c.Key)
	err := s.st.Release(ctx, c)
	end(span, err)
	return err
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
