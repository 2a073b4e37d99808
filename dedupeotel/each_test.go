package dedupeotel_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupelog"
	"github.com/gatewaykit/dedupe/dedupeotel"
	"github.com/gatewaykit/dedupe/dedupetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Batches (issue 35): the spans of Deduper.DoEach and of a Store's batch
// calls.

// oneKeyStore hides the batch calls of the store it embeds: a third-party
// store that is not a dedupe.BatchStore.
type oneKeyStore struct{ dedupe.Store }

// batchStore is a dedupe.BatchStore over a memory store, whatever the
// memory store implements: each batch call is one call of it (a round trip
// of a real server's store), made of the one-key calls in order.
type batchStore struct {
	*dedupe.MemoryStore
	calls atomic.Int64 // the batch calls made
}

func newBatchStore() *batchStore {
	return &batchStore{MemoryStore: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
}

func (s *batchStore) ClaimEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) ([]dedupe.Status, []error) {
	s.calls.Add(1)
	status, errs := make([]dedupe.Status, len(claims)), make([]error, len(claims))
	for n, c := range claims {
		status[n], errs[n] = s.Claim(ctx, c, lease)
	}
	return status, errs
}

func (s *batchStore) ExtendEach(ctx context.Context, claims []dedupe.Claim, lease time.Duration) []error {
	s.calls.Add(1)
	errs := make([]error, len(claims))
	for n, c := range claims {
		errs[n] = s.Extend(ctx, c, lease)
	}
	return errs
}

func (s *batchStore) ReleaseEach(ctx context.Context, claims []dedupe.Claim) []error {
	s.calls.Add(1)
	errs := make([]error, len(claims))
	for n, c := range claims {
		errs[n] = s.Release(ctx, c)
	}
	return errs
}

func (s *batchStore) MarkEach(ctx context.Context, keys []dedupe.Key, results [][]byte, ttl time.Duration) []error {
	s.calls.Add(1)
	errs := make([]error, len(keys))
	for n, k := range keys {
		switch {
		case results != nil && len(results) != len(keys):
			errs[n] = dedupe.ErrInvalidKey
		case results == nil || len(results[n]) == 0:
			errs[n] = s.Mark(ctx, k, ttl)
		default:
			errs[n] = s.MarkResult(ctx, k, results[n], ttl)
		}
	}
	return errs
}

// lineKeys returns n keys of LINE webhook events, a prefix each.
func lineKeys(prefix string, n int) []dedupe.Key {
	keys := make([]dedupe.Key, n)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "line", MessageID: prefix + strconv.Itoa(i)}
	}
	return keys
}

// childrenNamed returns the spans named name whose parent is p.
func (tr tree) childrenNamed(p tracetest.SpanStub, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range tr.spans {
		if s.Name == name && s.Parent.SpanID() == p.SpanContext.SpanID() {
			out = append(out, s)
		}
	}
	return out
}

// TestDoEachSpans runs a batch whose second message fails, then its
// redelivery with a repeated message, a message another caller holds and an
// invalid key: one DoEach span per batch with the count of each verdict, a
// process span per message run, holding fn's own span, and the store's batch
// calls as the batch's children.
func TestDoEachSpans(t *testing.T) {
	ctx := context.Background()
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	mem := newBatchStore()
	d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(mem, opt)), opt)
	keys := lineKeys("ev", 3)
	fail := true
	fn := func(ctx context.Context, i int) error {
		_, span := tp.Tracer("app").Start(ctx, "handle "+keys[i].MessageID)
		defer span.End()
		if i == 1 && fail {
			return errors.New("handler failed")
		}
		return nil
	}

	errs := d.DoEach(ctx, keys, fn)
	require.NoError(t, errs[0])
	require.EqualError(t, errs[1], "handler failed")
	require.NoError(t, errs[2])

	held := dedupe.Key{Channel: "line", MessageID: "held"}
	st, err := mem.Claim(ctx, dedupe.NewClaim(held), time.Minute)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, st)
	fail = false
	again := append(keys, keys[0], held, dedupe.Key{Channel: "line"})
	errs = d.DoEach(ctx, again, fn)
	require.ErrorIs(t, errs[0], dedupe.ErrDuplicate)
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], dedupe.ErrDuplicate)
	require.ErrorIs(t, errs[3], dedupe.ErrDuplicate)
	require.ErrorIs(t, errs[4], dedupe.ErrInFlight)
	require.ErrorIs(t, errs[5], dedupe.ErrInvalidKey)

	tr := tree{exp.GetSpans()}
	batches := tr.named(t, "dedupe.DoEach")
	require.Len(t, batches, 2)
	for n, want := range []struct {
		size                                  int64
		processed, duplicate, inFlight, faild int64
		run                                   []string // the verdicts of the process spans, in the order of keys
		calls                                 []string // the store's batch calls
	}{
		{3, 2, 0, 0, 1, []string{"processed", "failed", "processed"}, []string{"dedupe.ClaimEach", "dedupe.MarkEach", "dedupe.ReleaseEach"}},
		{6, 1, 3, 1, 1, []string{"processed"}, []string{"dedupe.ClaimEach", "dedupe.MarkEach"}},
	} {
		b := batches[n]
		a := attrs(b)
		assert.False(t, b.Parent.IsValid(), "a root span")
		assert.Equal(t, want.size, a["messaging.batch.message_count"].AsInt64())
		assert.Equal(t, "line", a["messaging.system"].AsString(), "every key of the batch is LINE's")
		assert.Equal(t, "process", a["messaging.operation.type"].AsString())
		assert.NotContains(t, a, attribute.Key("messaging.message.id"), "a batch has many")
		assert.Equal(t, want.processed, a[dedupeotel.ProcessedCountKey].AsInt64(), "batch %d", n)
		assert.Equal(t, want.duplicate, a[dedupeotel.DuplicateCountKey].AsInt64(), "batch %d", n)
		assert.Equal(t, want.inFlight, a[dedupeotel.InFlightCountKey].AsInt64(), "batch %d", n)
		assert.Equal(t, want.faild, a[dedupeotel.FailedCountKey].AsInt64(), "batch %d", n)
		assert.Equal(t, codes.Error, b.Status.Code, "batch %d has a failed key", n)

		procs := tr.childrenNamed(b, "dedupe.process")
		require.Len(t, procs, len(want.run), "batch %d: one process span per message run", n)
		for m, p := range procs {
			pa := attrs(p)
			assert.Equal(t, want.run[m], pa[dedupeotel.VerdictKey].AsString())
			assert.Equal(t, "line", pa["messaging.system"].AsString())
			assert.Equal(t, "process", pa["messaging.operation.type"].AsString())
			id := pa["messaging.message.id"].AsString()
			assert.Equal(t, []string{"handle " + id}, tr.children(p), "fn's span is under its message's")
			assert.False(t, p.EndTime.After(b.EndTime))
		}
		calls := map[string]bool{} // the marks go out as fns return: one MarkEach or more
		for _, name := range tr.children(b) {
			if name != "dedupe.process" {
				calls[name] = true
			}
		}
		assert.Len(t, calls, len(want.calls), "batch %d: %v", n, calls)
		for _, name := range want.calls {
			assert.True(t, calls[name], "batch %d: %s", n, name)
		}
	}
	first := batches[0]
	assert.Contains(t, first.Status.Description, "1 of 3 messages failed")
	assert.Equal(t, "*errors.errorString", attrs(first)["error.type"].AsString())
	failed := tr.childrenNamed(first, "dedupe.process")[1]
	assert.Equal(t, codes.Error, failed.Status.Code)
	assert.Equal(t, "*errors.errorString", attrs(failed)["error.type"].AsString())
	assert.Equal(t, "ev1", attrs(failed)["messaging.message.id"].AsString())
	require.Len(t, failed.Events, 1)
	assert.False(t, failed.Events[0].Time.After(failed.EndTime), "the error is recorded at the time fn returned")
	assert.Equal(t, "dedupe.ErrInvalidKey", attrs(batches[1])["error.type"].AsString())

	claim := tr.childrenNamed(first, "dedupe.ClaimEach")[0]
	ca := attrs(claim)
	assert.Equal(t, trace.SpanKindClient, claim.SpanKind)
	assert.Equal(t, int64(3), ca["db.operation.batch.size"].AsInt64())
	assert.Equal(t, "BATCH claim", ca["db.operation.name"].AsString())
	assert.Equal(t, int64(3), ca[dedupeotel.ClaimedCountKey].AsInt64())
	assert.Equal(t, int64(0), ca[dedupeotel.FailedCountKey].AsInt64())
	assert.Empty(t, tr.children(claim), "the store claims the batch at once: no per-key spans")
	assert.Equal(t, int64(len(tr.named(t, "dedupe.ClaimEach"))+len(tr.named(t, "dedupe.MarkEach"))+len(tr.named(t, "dedupe.ReleaseEach"))),
		mem.calls.Load(), "a batch call of the store per span")
	// The redelivery claims its keys but the repeat and the invalid one.
	second := attrs(tr.childrenNamed(batches[1], "dedupe.ClaimEach")[0])
	assert.Equal(t, int64(4), second["db.operation.batch.size"].AsInt64())
	assert.Equal(t, int64(1), second[dedupeotel.ClaimedCountKey].AsInt64())
	assert.Equal(t, int64(2), second[dedupeotel.DuplicateCountKey].AsInt64())
	assert.Equal(t, int64(1), second[dedupeotel.InFlightCountKey].AsInt64())
}

// TestDoEachChannels: a batch of several platforms names none.
func TestDoEachChannels(t *testing.T) {
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt)), opt)
	keys := []dedupe.Key{{Channel: "line", MessageID: "1"}, {Channel: "telegram", MessageID: "1"}}
	for _, err := range d.DoEach(context.Background(), keys, func(context.Context, int) error { return nil }) {
		require.NoError(t, err)
	}
	tr := tree{exp.GetSpans()}
	b := tr.one(t, "dedupe.DoEach")
	assert.NotContains(t, attrs(b), attribute.Key("messaging.system"))
	assert.Equal(t, codes.Unset, b.Status.Code)
	assert.Equal(t, int64(2), attrs(b)[dedupeotel.ProcessedCountKey].AsInt64())
	var systems []string
	for _, p := range tr.childrenNamed(b, "dedupe.process") {
		systems = append(systems, attrs(p)["messaging.system"].AsString())
	}
	assert.ElementsMatch(t, []string{"line", "telegram"}, systems, "each message names its own")
	assert.NotContains(t, attrs(tr.one(t, "dedupe.ClaimEach")), attribute.Key("messaging.system"))
}

// TestDoEachMask: WithMask hashes each message's id in its process span and
// hides it in the error texts, the batch's status included.
func TestDoEachMask(t *testing.T) {
	tp, exp := traced(t)
	secret := []byte("0123456789abcdef0123456789abcdef")
	opts := []dedupeotel.Option{dedupeotel.WithTracerProvider(tp), dedupeotel.WithMask(dedupelog.Hash, secret)}
	d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opts...)), opts...)
	keys := lineKeys("user-4711-", 2)
	errs := d.DoEach(context.Background(), keys, func(_ context.Context, i int) error {
		return fmt.Errorf("cannot answer %s", keys[i].MessageID)
	})
	require.Error(t, errs[0])

	tr := tree{exp.GetSpans()}
	b := tr.one(t, "dedupe.DoEach")
	assert.Contains(t, b.Status.Description, "2 of 2 messages failed")
	for _, s := range tr.spans {
		assert.NotContains(t, s.Status.Description, "user-4711", s.Name)
		for _, kv := range s.Attributes {
			assert.NotContains(t, kv.Value.Emit(), "user-4711", "%s %s", s.Name, kv.Key)
		}
		for _, e := range s.Events {
			for _, kv := range e.Attributes {
				assert.NotContains(t, kv.Value.Emit(), "user-4711", "%s %s", s.Name, kv.Key)
			}
		}
	}
	m := dedupelog.NewMasker(dedupelog.Hash, secret)
	var ids []string
	for _, p := range tr.named(t, "dedupe.process") {
		ids = append(ids, attrs(p)["messaging.message.id"].AsString())
	}
	want := make([]string, len(keys))
	for i, k := range keys {
		want[i], _ = m.ID(k.MessageID)
	}
	assert.ElementsMatch(t, want, ids, "hashed as the log records hash them")
}

// TestDoEachPanic: a fn that panics ends its message's span failed, as Do's
// wrapper does; the batch's span ends with an error status, and the span of
// the message run before ends without a verdict. The message after it is
// not run, and not spanned.
func TestDoEachPanic(t *testing.T) {
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt)), opt)
	keys := lineKeys("p", 3)
	require.PanicsWithValue(t, "boom", func() {
		d.DoEach(context.Background(), keys, func(_ context.Context, i int) error {
			if i == 1 {
				panic("boom")
			}
			return nil
		})
	})

	tr := tree{exp.GetSpans()}
	b := tr.one(t, "dedupe.DoEach")
	assert.Equal(t, codes.Error, b.Status.Code)
	assert.Equal(t, "panic", b.Status.Description)
	assert.NotContains(t, attrs(b), dedupeotel.ProcessedCountKey)
	procs := tr.childrenNamed(b, "dedupe.process")
	require.Len(t, procs, 2, "p2 did not run")
	byID := map[string]tracetest.SpanStub{}
	for _, p := range procs {
		byID[attrs(p)["messaging.message.id"].AsString()] = p
	}
	assert.Equal(t, "failed", attrs(byID["p1"])[dedupeotel.VerdictKey].AsString())
	assert.Equal(t, codes.Error, byID["p1"].Status.Code)
	assert.NotContains(t, attrs(byID["p0"]), dedupeotel.VerdictKey, "DoEach returned no verdict")

	// p0 was marked, p1 and p2 released: the redelivery runs those two.
	var ran []int
	errs := d.DoEach(context.Background(), keys, func(_ context.Context, i int) error { ran = append(ran, i); return nil })
	assert.Equal(t, []int{1, 2}, ran)
	assert.ErrorIs(t, errs[0], dedupe.ErrDuplicate)
}

// TestDoEachResultSpans: DoEachResult returns the results, a copy gets the
// first run's, and the spans are DoEach's.
func TestDoEachResultSpans(t *testing.T) {
	ctx := context.Background()
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt)), opt)
	keys := lineKeys("r", 2)
	answer := func(_ context.Context, i int) ([]byte, error) { return []byte("answer " + keys[i].MessageID), nil }
	res, errs := d.DoEachResult(ctx, keys, answer)
	require.Equal(t, []error{nil, nil}, errs)
	assert.Equal(t, [][]byte{[]byte("answer r0"), []byte("answer r1")}, res)
	res, errs = d.DoEachResult(ctx, keys, func(context.Context, int) ([]byte, error) { return nil, errors.New("ran twice") })
	require.ErrorIs(t, errs[0], dedupe.ErrDuplicate)
	assert.Equal(t, [][]byte{[]byte("answer r0"), []byte("answer r1")}, res, "the kept results")

	tr := tree{exp.GetSpans()}
	batches := tr.named(t, "dedupe.DoEach")
	require.Len(t, batches, 2)
	assert.Equal(t, int64(2), attrs(batches[0])[dedupeotel.ProcessedCountKey].AsInt64())
	assert.Equal(t, int64(2), attrs(batches[1])[dedupeotel.DuplicateCountKey].AsInt64())
	assert.Len(t, tr.childrenNamed(batches[0], "dedupe.process"), 2)
	assert.Empty(t, tr.childrenNamed(batches[1], "dedupe.process"))
	assert.Len(t, tr.childrenNamed(batches[1], "dedupe.result"), 2, "the Deduper reads each kept result")
}

// TestDoEachConcurrent runs a batch with WithConcurrency, fns at once, under
// -race: each process span is its own message's.
func TestDoEachConcurrent(t *testing.T) {
	tp, exp := traced(t)
	opt := dedupeotel.WithTracerProvider(tp)
	d := dedupeotel.NewDeduper(dedupe.New(dedupeotel.NewStore(dedupe.NewMemoryStore(dedupe.MemoryConfig{}), opt),
		dedupe.WithConcurrency(8)), opt)
	keys := lineKeys("c", 64)
	errs := d.DoEach(context.Background(), keys, func(_ context.Context, i int) error {
		if i%4 == 0 {
			return errors.New("failed")
		}
		return nil
	})
	tr := tree{exp.GetSpans()}
	procs := tr.named(t, "dedupe.process")
	require.Len(t, procs, 64)
	for _, p := range procs {
		a := attrs(p)
		i, err := strconv.Atoi(a["messaging.message.id"].AsString()[1:])
		require.NoError(t, err)
		want := "processed"
		if errs[i] != nil {
			want = "failed"
		}
		assert.Equal(t, want, a[dedupeotel.VerdictKey].AsString(), "c%d", i)
	}
	assert.Equal(t, int64(16), attrs(tr.one(t, "dedupe.DoEach"))[dedupeotel.FailedCountKey].AsInt64())
}

// TestStoreBatchSpans calls the batch methods of a Store over a BatchStore
// and over a store that is not one: one span per batch call either way, with
// the per-key calls as its children for the latter; an invalid item fails
// alone and is counted.
func TestStoreBatchSpans(t *testing.T) {
	for _, tc := range []struct {
		name  string
		inner func() dedupe.Store
		each  bool // the inner store makes the batch calls
	}{
		{"BatchStore", func() dedupe.Store { return newBatchStore() }, true},
		{"OneKeyStore", func() dedupe.Store { return oneKeyStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			tp, exp := traced(t)
			st := dedupeotel.NewStore(tc.inner(), dedupeotel.WithTracerProvider(tp))
			keys := lineKeys("s", 3)
			claims := []dedupe.Claim{dedupe.NewClaim(keys[0]), dedupe.NewClaim(keys[1]), {Key: keys[2], Token: "not a token"}}
			status, errs := st.ClaimEach(ctx, claims, time.Minute)
			require.Equal(t, []dedupe.Status{dedupe.Claimed, dedupe.Claimed}, status[:2])
			require.NoError(t, errs[0])
			require.ErrorIs(t, errs[2], dedupe.ErrInvalidKey)
			require.Equal(t, []error{nil, nil}, st.ExtendEach(ctx, claims[:2], time.Minute))
			require.Equal(t, []error{nil}, st.MarkEach(ctx, keys[:1], [][]byte{[]byte("kept")}, time.Hour))
			require.Equal(t, []error{nil}, st.ReleaseEach(ctx, claims[1:2]))
			res, ok, err := st.Result(ctx, keys[0])
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, "kept", string(res))

			tr := tree{exp.GetSpans()}
			claim := tr.one(t, "dedupe.ClaimEach")
			a := attrs(claim)
			assert.Equal(t, int64(2), a[dedupeotel.ClaimedCountKey].AsInt64())
			assert.Equal(t, int64(1), a[dedupeotel.FailedCountKey].AsInt64())
			assert.Equal(t, "dedupe.ErrInvalidKey", a["error.type"].AsString())
			assert.Equal(t, "line", a["messaging.system"].AsString())
			assert.Equal(t, "memory", a["db.system.name"].AsString())
			assert.Contains(t, claim.Status.Description, "1 of 3 items failed")
			for name, n := range map[string]int{"dedupe.ClaimEach": 3, "dedupe.ExtendEach": 2, "dedupe.MarkEach": 1, "dedupe.ReleaseEach": 1} {
				s := tr.one(t, name)
				assert.Equal(t, trace.SpanKindClient, s.SpanKind)
				sa := attrs(s)
				if n == 1 {
					assert.NotContains(t, sa, attribute.Key("db.operation.batch.size"), "one item is a single operation")
					assert.NotContains(t, sa["db.operation.name"].AsString(), "BATCH")
				} else {
					assert.Equal(t, int64(n), sa["db.operation.batch.size"].AsInt64(), name)
					assert.Contains(t, sa["db.operation.name"].AsString(), "BATCH ")
				}
				if tc.each {
					assert.Empty(t, tr.children(s), "%s: one round trip", name)
				} else {
					assert.Len(t, tr.children(s), n, "%s: a span per key", name)
				}
			}
		})
	}
}

// barrierStore is a store that is not a BatchStore whose Claim waits until
// n claims are in it at once, or ctx ends.
type barrierStore struct {
	dedupe.Store
	n    int
	mu   sync.Mutex
	in   int
	full chan struct{}
}

func (s *barrierStore) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	s.mu.Lock()
	if s.in++; s.in == s.n {
		close(s.full)
	}
	s.mu.Unlock()
	select {
	case <-s.full:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return s.Store.Claim(ctx, c, lease)
}

// TestStoreBatchConcurrent: over a store that is not a BatchStore, a
// Store's ClaimEach asks the keys at once, as DoEach asks such a store
// itself, not one after another: each claim waits until all 16 are in the
// store. A serial loop would end in the deadline.
func TestStoreBatchConcurrent(t *testing.T) {
	tp, _ := traced(t)
	inner := &barrierStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{}), n: 16, full: make(chan struct{})}
	st := dedupeotel.NewStore(inner, dedupeotel.WithTracerProvider(tp))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys := lineKeys("b", 16)
	claims := make([]dedupe.Claim, len(keys))
	for i, k := range keys {
		claims[i] = dedupe.NewClaim(k)
	}
	status, errs := st.ClaimEach(ctx, claims, time.Minute)
	for i := range claims {
		require.NoError(t, errs[i])
		require.Equal(t, dedupe.Claimed, status[i])
	}
}

// TestStoreConformance runs the conformance suite, its BatchStore group
// included, on a Store over a BatchStore and over a store that is not one.
func TestStoreConformance(t *testing.T) {
	tp := sdktrace.NewTracerProvider() // recording spans, exported nowhere
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	opt := dedupeotel.WithTracerProvider(tp)
	memory := func(o dedupetest.Options) *dedupe.MemoryStore {
		return dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: o.TTL, Lease: o.Lease, MaxSize: o.MaxSize, Now: o.Now})
	}
	t.Run("BatchStore", func(t *testing.T) {
		dedupetest.Run(t, dedupetest.Config{New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
			return dedupeotel.NewStore(&batchStore{MemoryStore: memory(o)}, opt)
		}})
	})
	t.Run("OneKeyStore", func(t *testing.T) {
		dedupetest.Run(t, dedupetest.Config{New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
			return dedupeotel.NewStore(oneKeyStore{memory(o)}, opt)
		}})
	})
}
