package dedupeotel_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupeotel"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// traced returns a tracer provider exporting to an in-memory exporter.
func traced(t *testing.T, more ...sdktrace.SpanProcessor) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	exp := tracetest.NewInMemoryExporter()
	opts := []sdktrace.TracerProviderOption{sdktrace.WithSyncer(exp)}
	for _, p := range more {
		opts = append(opts, sdktrace.WithSpanProcessor(p))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// tree indexes exported spans by name and by span id.
type tree struct {
	spans tracetest.SpanStubs
}

func (tr tree) named(t *testing.T, name string) []tracetest.SpanStub {
	t.Helper()
	var out []tracetest.SpanStub
	for _, s := range tr.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func (tr tree) one(t *testing.T, name string) tracetest.SpanStub {
	t.Helper()
	s := tr.named(t, name)
	require.Len(t, s, 1, "spans named %q in %v", name, tr.names())
	return s[0]
}

func (tr tree) names() []string {
	var out []string
	for _, s := range tr.spans {
		out = append(out, s.Name)
	}
	return out
}

// children returns the names of the spans whose parent is p, in the order
// they ended.
func (tr tree) children(p tracetest.SpanStub) []string {
	var out []string
	for _, s := range tr.spans {
		if s.Parent.SpanID() == p.SpanContext.SpanID() {
			out = append(out, s.Name)
		}
	}
	return out
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value)
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

var key = dedupe.Key{Channel: "telegram", MessageID: "1001"}

func ok(context.Context) error { return nil }

func TestDoSpans(t *testing.T) {
	ctx := context.Background()
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt)), opt)

	require.Error(t, d.Do(ctx, key, func(context.Context) error { return errors.New("handler failed") }))
	require.NoError(t, d.Do(ctx, key, ok))
	require.ErrorIs(t, d.Do(ctx, key, ok), dedupe.ErrDuplicate)

	tr := tree{exp.GetSpans()}
	dos := tr.named(t, "dedupe.Do")
	require.Len(t, dos, 3)
	for i, want := range []struct {
		verdict  string
		children []string
	}{
		{"failed", []string{"dedupe.claim", "dedupe.release"}},
		{"processed", []string{"dedupe.claim", "dedupe.mark"}},
		{"duplicate", []string{"dedupe.claim"}},
	} {
		do := dos[i]
		a := attrs(do)
		assert.False(t, do.Parent.IsValid(), "a root span")
		assert.Equal(t, want.verdict, a[dedupeotel.VerdictKey].AsString())
		assert.Equal(t, "telegram", a["messaging.system"].AsString())
		assert.Equal(t, "1001", a["messaging.message.id"].AsString())
		assert.Equal(t, "process", a["messaging.operation.type"].AsString())
		assert.Equal(t, want.children, tr.children(do), "Do %d", i)
		if want.verdict == "failed" {
			assert.Equal(t, codes.Error, do.Status.Code)
			assert.Equal(t, "*errors.errorString", a["error.type"].AsString())
		} else {
			assert.Equal(t, codes.Unset, do.Status.Code)
		}
	}
	claims := tr.named(t, "dedupe.claim")
	require.Len(t, claims, 3)
	for i, status := range []string{"claimed", "claimed", "duplicate"} {
		a := attrs(claims[i])
		assert.Equal(t, trace.SpanKindClient, claims[i].SpanKind)
		assert.Equal(t, status, a[dedupeotel.ClaimStatusKey].AsString())
		assert.Equal(t, "claim", a["db.operation.name"].AsString())
		assert.Equal(t, "memory", a["db.system.name"].AsString())
		assert.Equal(t, "memory", a[dedupeotel.BackendKey].AsString())
		assert.Equal(t, "1001", a["messaging.message.id"].AsString())
	}
}

func TestStoreErrorSpans(t *testing.T) {
	ctx := context.Background()
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	require.NoError(t, st.Close())
	d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(st, opt)), opt, dedupeotel.WithoutMessageID())
	require.ErrorIs(t, d.Do(ctx, key, ok), dedupe.ErrClosed)

	tr := tree{exp.GetSpans()}
	do := tr.one(t, "dedupe.Do")
	assert.Equal(t, "store_error", attrs(do)[dedupeotel.VerdictKey].AsString())
	assert.Equal(t, "dedupe.ErrClosed", attrs(do)["error.type"].AsString())
	assert.NotContains(t, attrs(do), attribute.Key("messaging.message.id"), "WithoutMessageID")
	claim := tr.one(t, "dedupe.claim")
	assert.Equal(t, codes.Error, claim.Status.Code)
	assert.Equal(t, "dedupe.ErrClosed", attrs(claim)["error.type"].AsString())
	assert.Equal(t, do.SpanContext.SpanID(), claim.Parent.SpanID())
}

// countingStore signals once its Claim was asked n times.
type countingStore struct {
	dedupe.Store
	mu   sync.Mutex
	n    int
	done chan struct{}
}

func (s *countingStore) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	status, err := s.Store.Claim(ctx, c, lease)
	s.mu.Lock()
	if s.n--; s.n == 0 {
		close(s.done)
	}
	s.mu.Unlock()
	return status, err
}

// TestWaitSpan makes a copy wait for a message another Do processes: the
// copy's Do has its first claim and one dedupe.wait span, which counts the
// claims asked again and has the last of them (duplicate) as its only child.
func TestWaitSpan(t *testing.T) {
	ctx := context.Background()
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	// The owner's claim, the copy's first and two asked again during the wait.
	st := &countingStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{}), n: 4, done: make(chan struct{})}
	d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(st, opt), dedupe.WithWait(time.Minute)), opt)

	second := make(chan error)
	require.NoError(t, d.Do(ctx, key, func(context.Context) error {
		go func() { second <- d.Do(ctx, key, ok) }()
		<-st.done // the copy waits
		return nil
	}))
	require.ErrorIs(t, <-second, dedupe.ErrDuplicate)

	tr := tree{exp.GetSpans()}
	dos := tr.named(t, "dedupe.Do")
	require.Len(t, dos, 2)
	copyDo := dos[0]
	if attrs(copyDo)[dedupeotel.VerdictKey].AsString() != "duplicate" {
		copyDo = dos[1]
	}
	assert.Equal(t, []string{"dedupe.claim", "dedupe.wait"}, tr.children(copyDo))
	wait := tr.one(t, "dedupe.wait")
	assert.Equal(t, "duplicate", attrs(wait)[dedupeotel.WaitResultKey].AsString())
	assert.GreaterOrEqual(t, attrs(wait)[dedupeotel.WaitPollsKey].AsInt64(), int64(2), "the claims asked again while waiting")
	require.Equal(t, []string{"dedupe.claim"}, tr.children(wait), "only the last claim of the wait is a span")
	claims := tr.named(t, "dedupe.claim")
	require.Len(t, claims, 3)
	for _, s := range claims {
		if s.Parent.SpanID() == wait.SpanContext.SpanID() {
			assert.Equal(t, "duplicate", attrs(s)[dedupeotel.ClaimStatusKey].AsString())
			assert.Equal(t, "1001", attrs(s)["messaging.message.id"].AsString())
		}
	}
	first := claims[0]
	assert.False(t, wait.StartTime.Before(first.EndTime), "the wait starts when the first claim found the copy in flight")
}

func TestTraceID(t *testing.T) {
	tp, _ := traced(t)
	ctx, span := tp.Tracer("test").Start(context.Background(), "delivery")
	defer span.End()
	assert.Equal(t, span.SpanContext().TraceID().String(), dedupeotel.TraceID(ctx))
	assert.Len(t, dedupeotel.TraceID(ctx), 32)

	plain := dedupe.ContextWithTraceID(context.Background(), "gateway-42")
	assert.Equal(t, "gateway-42", dedupeotel.TraceID(plain), "ContextWithTraceID keeps working")
	assert.Equal(t, "", dedupeotel.TraceID(context.Background()))
}

func TestHandlerSpans(t *testing.T) {
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	d := dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt))
	var seen []string
	var traceID string
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, v := dedupehttp.KeyFrom(r.Context())
		seen = append(seen, string(v))
		traceID = dedupe.TraceID(r.Context())
	})
	mux := http.NewServeMux()
	mux.Handle("POST /telegram", dedupeotel.Handler(dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram))(dedupeotel.Annotate(app, opt)), opt))

	for range 2 {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":1001}`)))
		require.Equal(t, http.StatusOK, w.Code)
	}
	require.Equal(t, []string{"new"}, seen)

	tr := tree{exp.GetSpans()}
	servers := tr.named(t, "POST /telegram")
	require.Len(t, servers, 2)
	for i, want := range []struct {
		verdict  string
		children []string
	}{
		{"processed", []string{"dedupe.claim", "dedupe.mark"}},
		{"duplicate", []string{"dedupe.claim"}},
	} {
		s := servers[i]
		a := attrs(s)
		assert.Equal(t, trace.SpanKindServer, s.SpanKind)
		assert.Equal(t, want.verdict, a[dedupeotel.VerdictKey].AsString())
		assert.Equal(t, "POST", a["http.request.method"].AsString())
		assert.Equal(t, "/telegram", a["http.route"].AsString())
		assert.Equal(t, int64(200), a["http.response.status_code"].AsInt64())
		assert.Equal(t, want.children, tr.children(s), "delivery %d", i)
	}
	assert.Equal(t, "1001", attrs(servers[0])["messaging.message.id"].AsString(), "Annotate names the key")
	assert.Equal(t, servers[0].SpanContext.TraceID().String(), traceID, "the library's trace id is the span's")
}

func TestHandlerBehindAnotherSpan(t *testing.T) {
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	d := dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt))
	h := dedupeotel.Handler(dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram))(http.NotFoundHandler()), opt)
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { // as otelhttp.NewHandler does
		ctx, span := tp.Tracer("outer").Start(r.Context(), "outer", trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
	w := httptest.NewRecorder()
	outer.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":7}`)))
	require.Equal(t, http.StatusNotFound, w.Code)

	tr := tree{exp.GetSpans()}
	s := tr.one(t, "outer")
	assert.Equal(t, []string{"dedupe.claim", "dedupe.release"}, tr.children(s), "no second server span")
	assert.Equal(t, int64(404), attrs(s)["http.response.status_code"].AsInt64())
}

// A Forget is a "dedupe.forget" span that says whether a mark was dropped;
// a refused one is an error span; a wrapped store that cannot forget fails
// with errors.ErrUnsupported and makes no span.
func TestForgetSpans(t *testing.T) {
	ctx := context.Background()
	tp, exp := traced(t)
	st := dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), dedupeotel.WithTracerProvider(tp))
	require.NoError(t, st.Mark(ctx, key, time.Hour))
	forgotten, err := st.Forget(ctx, key)
	require.NoError(t, err)
	require.True(t, forgotten)
	_, err = st.Claim(ctx, dedupe.NewClaim(key), time.Hour)
	require.NoError(t, err)
	_, err = st.Forget(ctx, key)
	require.ErrorIs(t, err, dedupe.ErrInFlight)

	spans := tree{exp.GetSpans()}.named(t, "dedupe.forget")
	require.Len(t, spans, 2)
	assert.True(t, attrs(spans[0])["dedupe.forgotten"].AsBool())
	assert.Equal(t, "forget", attrs(spans[0])["db.operation.name"].AsString())
	assert.Equal(t, codes.Unset, spans[0].Status.Code)
	assert.False(t, attrs(spans[1])["dedupe.forgotten"].AsBool())
	assert.Equal(t, codes.Error, spans[1].Status.Code)
	assert.Equal(t, "dedupe.ErrInFlight", attrs(spans[1])["error.type"].AsString())

	exp.Reset()
	plain := dedupeotel.NewStore(struct{ dedupe.Store }{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}, dedupeotel.WithTracerProvider(tp))
	_, err = plain.Forget(ctx, key)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Empty(t, tree{exp.GetSpans()}.named(t, "dedupe.forget"))
}
