package dedupeotel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/dedupelog"
	"github.com/gatewaykit/dedupe/dedupeotel"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Traces and records as an operator reads them (issue 34, item 11).

// firstInFlight signals when a claim span answered in_flight: a copy found
// the message in flight and starts to wait.
type firstInFlight struct {
	sdktrace.SpanProcessor
	once sync.Once
	done chan struct{}
}

func (p *firstInFlight) OnEnd(s sdktrace.ReadOnlySpan) {
	for _, kv := range s.Attributes() {
		if s.Name() == "dedupe.claim" && kv.Key == dedupeotel.ClaimStatusKey && kv.Value.AsString() == "in_flight" {
			p.once.Do(func() { close(p.done) })
		}
	}
}

// roots returns the spans without a parent.
func (tr tree) roots() []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tr.spans {
		if !s.Parent.IsValid() {
			out = append(out, s)
		}
	}
	return out
}

// TestRootSpansNameTheMessage serves an update behind Handler, a copy that
// waits for it, and a redelivery, and checks that every root span (the
// delivery's) carries messaging.system and messaging.message.id, the
// duplicate's and the waiting copy's included. Before, only the delivery
// whose handler ran did (through Annotate): 1 of 3 root spans.
func TestRootSpansNameTheMessage(t *testing.T) {
	seen := &firstInFlight{SpanProcessor: tracetest.NewSpanRecorder(), done: make(chan struct{})}
	tp, exp := traced(t, seen)
	opt := dedupeotel.WithTracerProvider(tp)
	d := dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt), dedupe.WithWait(time.Minute))
	in := make(chan struct{})
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(in)   // the handler runs once
		<-seen.done // and holds the claim until the copy waits
	})
	h := dedupeotel.Handler(dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram),
		dedupehttp.WithLogger(slog.New(slog.DiscardHandler)))(dedupeotel.Annotate(app, opt)), opt)
	send := func() int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":1001}`)))
		return w.Code
	}

	var wg sync.WaitGroup
	wg.Go(func() { assert.Equal(t, http.StatusOK, send()) })
	<-in
	wg.Go(func() { assert.Equal(t, http.StatusOK, send(), "the copy that waited") })
	wg.Wait()
	require.Equal(t, http.StatusOK, send(), "the redelivery")

	roots := tree{exp.GetSpans()}.roots()
	require.Len(t, roots, 3)
	for _, s := range roots {
		a := attrs(s)
		assert.Equal(t, "telegram", a["messaging.system"].AsString(), "%s %s", s.Name, a[dedupeotel.VerdictKey].AsString())
		assert.Equal(t, "1001", a["messaging.message.id"].AsString(), "%s %s", s.Name, a[dedupeotel.VerdictKey].AsString())
	}
}

// TestOneSpanPerWait makes a copy wait out Telegram's budget (40 s, in a
// synctest bubble) for a message another caller holds throughout, and
// counts the spans: one dedupe.wait, holding the number of claims asked
// during the wait, and only the copy's first and last claims as spans.
// Before, each claim asked during the wait was a span of its own: 164 here,
// 166 claim spans in all.
func TestOneSpanPerWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		exp := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
		defer func() { _ = tp.Shutdown(ctx) }()
		opt := dedupeotel.WithTracerProvider(tp)
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		defer st.Close()
		d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(st, opt), dedupe.WithWait(platform.Telegram.AckBudget)), opt)

		var copyErr error
		start := time.Now()
		require.NoError(t, d.Do(ctx, key, func(context.Context) error {
			done := make(chan struct{})
			go func() { copyErr = d.Do(ctx, key, ok); close(done) }()
			<-done // the owner holds the claim until the copy gave up
			return nil
		}))
		require.ErrorIs(t, copyErr, dedupe.ErrInFlight)
		require.GreaterOrEqual(t, time.Since(start), platform.Telegram.AckBudget)

		tr := tree{exp.GetSpans()}
		claims := tr.named(t, "dedupe.claim")
		assert.Equal(t, 3, len(claims), "claim spans: the owner's claim, and the copy's first and last")
		wait := tr.one(t, "dedupe.wait")
		assert.Equal(t, 1, len(tr.children(wait)), "spans under the wait: only its last claim")
		a := attrs(wait)
		assert.Equal(t, "in_flight", a[dedupeotel.WaitResultKey].AsString())
		assert.Greater(t, a[dedupeotel.WaitPollsKey].AsInt64(), int64(100), "the claims asked during the wait")
		t.Logf("%d claims asked during the wait, %d claim spans", a[dedupeotel.WaitPollsKey].AsInt64(), len(claims))
		if len(tr.children(wait)) == 1 {
			for _, c := range claims {
				if c.Parent.SpanID() == wait.SpanContext.SpanID() {
					assert.Equal(t, "in_flight", attrs(c)[dedupeotel.ClaimStatusKey].AsString())
					assert.False(t, c.EndTime.After(wait.EndTime), "within the wait")
					assert.False(t, c.StartTime.Before(wait.StartTime), "within the wait")
				}
			}
		}
	})
}

// TestDeliveryVerdictMatchesRecord serves, behind Handler, an update the
// handler processes, one it fails (500) and a redelivery of the first, and
// checks that each delivery's span says the result of its decision record
// (found by trace id). Before, the spans of the deliveries whose handler ran
// said "new", their records "processed" and "failed": 2 of 3 differed.
func TestDeliveryVerdictMatchesRecord(t *testing.T) {
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	var logs bytes.Buffer
	d := dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt),
		dedupe.WithLogger(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))))
	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k, _ := dedupehttp.KeyFrom(r.Context()); k.MessageID == "2" {
			http.Error(w, "try again", http.StatusInternalServerError)
		}
	})
	h := dedupeotel.Handler(dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram),
		dedupehttp.WithLogger(slog.New(slog.DiscardHandler)))(dedupeotel.Annotate(app, opt)), opt)
	for _, id := range []int{1, 2, 1} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(fmt.Sprintf(`{"update_id":%d}`, id))))
	}

	results := map[string]string{} // trace id: the decision record's result
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec["msg"] == "dedupe: decision" {
			results[rec["trace_id"].(string)] = rec["result"].(string)
		}
	}
	roots := tree{exp.GetSpans()}.roots()
	require.Len(t, roots, 3)
	var verdicts []string
	for _, s := range roots {
		v := attrs(s)[dedupeotel.VerdictKey].AsString()
		verdicts = append(verdicts, v)
		assert.Equal(t, results[s.SpanContext.TraceID().String()], v, "the span's verdict is its record's result")
	}
	assert.Equal(t, []string{"processed", "failed", "duplicate"}, verdicts)
}

// unmarkableStore claims as a memory store does and refuses every mark with
// an error that quotes the message id, as a store's error text can.
type unmarkableStore struct{ dedupe.Store }

func (s unmarkableStore) Mark(_ context.Context, key dedupe.Key, _ time.Duration) error {
	return fmt.Errorf("%w: no room to mark %s", dedupe.ErrStoreFull, key.MessageID)
}

// spanTexts returns every text of s an exporter sends: its name, its
// attributes' and its events' values, and its status description.
func spanTexts(s tracetest.SpanStub) []string {
	out := []string{s.Name, s.Status.Description}
	add := func(kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			out = append(out, kv.Value.Emit())
		}
	}
	add(s.Attributes)
	for _, e := range s.Events {
		out = append(out, e.Name)
		add(e.Attributes)
	}
	return out
}

// TestWithoutMessageIDHoldsNoID runs a Do whose mark fails, with the error
// quoting the key and the id, under WithoutMessageID: no span holds the id,
// in its attributes, its recorded error or its status. Before, 4 texts
// quoted it: the status descriptions and exception events of the Do's span
// and of its mark's.
func TestWithoutMessageIDHoldsNoID(t *testing.T) {
	const id = "987654321987"
	tp, exp := traced(t)
	opts := []dedupeotel.Option{dedupeotel.WithTracerProvider(tp), dedupeotel.WithoutMessageID()}
	st := dedupeotel.NewStore(unmarkableStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}, opts...)
	d := dedupeotel.NewDeduper(dedupe.New(st, dedupe.WithLogger(slog.New(slog.DiscardHandler))), opts...)
	require.ErrorIs(t, d.Do(context.Background(), dedupe.Key{Channel: "telegram", MessageID: id}, ok), dedupe.ErrStoreFull)

	spans := exp.GetSpans()
	require.NotEmpty(t, spans)
	for _, s := range spans {
		for _, text := range spanTexts(s) {
			assert.NotContains(t, text, id, "span %s", s.Name)
		}
	}
	do := tree{spans}.one(t, "dedupe.Do")
	assert.Equal(t, "dedupe: telegram processed but not marked: dedupe: store full of claims: no room to mark [id]", do.Status.Description, "the error is masked, not left out")
}

// TestWithMaskMatchesRecords masks the spans and the decision records with
// one key: a delivery's span and its Do's spans hold the id as the record
// does, hashed, and nowhere raw, its failed mark's error included.
func TestWithMaskMatchesRecords(t *testing.T) {
	const id = "987654321987"
	secret := []byte("a secret of 16 bytes or more")
	tp, exp := traced(t)
	opts := []dedupeotel.Option{dedupeotel.WithTracerProvider(tp), dedupeotel.WithMask(dedupelog.Hash, secret)}
	var logs bytes.Buffer
	logger := slog.New(dedupelog.Mask(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}), dedupelog.Hash, secret))
	st := dedupeotel.NewStore(unmarkableStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})}, opts...)
	d := dedupe.New(st, dedupe.WithLogger(logger))
	h := dedupeotel.Handler(dedupehttp.Middleware(d, dedupehttp.FromPreset(platform.Telegram),
		dedupehttp.WithLogger(logger))(http.NotFoundHandler()), opts...)
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/telegram", strings.NewReader(`{"update_id":`+id+`}`)))
	td := dedupeotel.NewDeduper(d, opts...)
	require.Error(t, td.Do(context.Background(), dedupe.Key{Channel: "telegram", MessageID: id}, ok))

	hashed, _ := dedupelog.NewMasker(dedupelog.Hash, secret).ID(id)
	var records int
	for line := range strings.Lines(logs.String()) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec))
		if rec["msg"] == "dedupe: decision" {
			records++
			assert.Equal(t, hashed, rec["message_id"])
		}
	}
	assert.Equal(t, 2, records)
	spans := exp.GetSpans()
	for _, s := range spans {
		assert.Equal(t, hashed, attrs(s)["messaging.message.id"].AsString(), "span %s", s.Name)
		for _, text := range spanTexts(s) {
			assert.NotContains(t, text, id, "span %s", s.Name)
		}
	}
	do := tree{spans}.one(t, "dedupe.Do")
	assert.Contains(t, do.Status.Description, "telegram:"+hashed+" processed but not marked")
}
