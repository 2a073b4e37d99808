package dedupetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// testDeduperPayload runs payload validation ([dedupe.WithPayloadCheck])
// over the store: one gateway processes messages with their payloads, and
// another, over the same store, gets their copies. A copy whose payload is
// the same (its JSON reordered) is a duplicate with the first run's result;
// an altered copy gets [dedupe.ErrPayloadMismatch] and is not run, for Do,
// DoResult, DoEach and DoEachResult alike, and a result as long as the
// frame leaves room for comes back whole. So the store keeps the
// fingerprint with the mark, where every gateway reads it.
func testDeduperPayload(t *testing.T, s *suite) {
	st := s.open(t, Options{})
	first := dedupe.New(st, dedupe.WithLease(time.Hour), dedupe.WithPayloadCheck())
	other := dedupe.New(st, dedupe.WithLease(time.Hour), dedupe.WithPayloadCheck())
	t.Cleanup(func() { _, _ = first.Close(), other.Close() })
	ctx := context.Background()
	var runs atomic.Int32
	fn := func(res []byte) func(context.Context) ([]byte, error) {
		return func(context.Context) ([]byte, error) { runs.Add(1); return res, nil }
	}
	payload := func(i int, text string) []byte { return fmt.Appendf(nil, `{"text":%q,"n":%d}`, text, i) }
	keys := make([]dedupe.Key, 10)
	for i := range keys {
		keys[i] = s.key()
		res, err := first.With(dedupe.WithPayload(payload(i, "hello"))).DoResult(ctx, keys[i], fn(fmt.Appendf(nil, "reply %d", i)))
		if err != nil || string(res) != fmt.Sprintf("reply %d", i) {
			t.Fatalf("DoResult(%s) = %q, %v; want its reply, nil", keys[i], res, err)
		}
	}
	for i, k := range keys {
		same := fmt.Appendf(nil, ` { "n" : %d, "text" : "hello" } `, i)
		res, err := other.With(dedupe.WithPayload(same)).DoResult(ctx, k, fn(nil))
		if !errors.Is(err, dedupe.ErrDuplicate) || errors.Is(err, dedupe.ErrPayloadMismatch) || string(res) != fmt.Sprintf("reply %d", i) {
			t.Fatalf("a copy of %s with its payload reordered: %q, %v; want the first reply, ErrDuplicate", k, res, err)
		}
		res, err = other.With(dedupe.WithPayload(payload(i, "hellO"))).DoResult(ctx, k, fn(nil))
		if !errors.Is(err, dedupe.ErrPayloadMismatch) || res != nil {
			t.Fatalf("an altered copy of %s: %q, %v; want nil, ErrPayloadMismatch", k, res, err)
		}
		if err := other.With(dedupe.WithPayload(payload(i, "hellO"))).Do(ctx, k, func(context.Context) error { runs.Add(1); return nil }); !errors.Is(err, dedupe.ErrPayloadMismatch) {
			t.Fatalf("an altered copy of %s through Do: %v; want ErrPayloadMismatch", k, err)
		}
	}
	if n := runs.Load(); n != int32(len(keys)) {
		t.Fatalf("fn ran %d times for %d messages and their copies", n, len(keys))
	}
	if got := other.Stats(); got.PayloadMismatches != 20 || got.Duplicates != 10 || got.PayloadUnverified != 0 {
		t.Fatalf("the other gateway's Stats: %d mismatches, %d duplicates, %d unverified; want 20, 10, 0",
			got.PayloadMismatches, got.Duplicates, got.PayloadUnverified)
	}
	payloadEach(t, s, first, other)
	payloadLongResult(t, s, first, other)
}

// payloadEach checks DoEachResult with payloads: a batch processed by one
// gateway, then replayed through another with every other payload altered
// and a key held twice with two payloads.
func payloadEach(t *testing.T, s *suite, first, other *dedupe.Deduper) {
	t.Helper()
	ctx := context.Background()
	keys := make([]dedupe.Key, 6)
	payloads := make([][]byte, len(keys))
	for i := range keys {
		keys[i], payloads[i] = s.key(), fmt.Appendf(nil, "event %d", i)
	}
	reply := func(_ context.Context, i int) ([]byte, error) { return fmt.Appendf(nil, "reply %d", i), nil }
	_, errs := first.With(dedupe.WithPayload(payloads...)).DoEachResult(ctx, keys, reply)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("DoEachResult: %s: %v", keys[i], err)
		}
	}
	replay := append(append([]dedupe.Key{}, keys...), keys[1])
	altered := make([][]byte, 0, len(replay))
	for i := range keys {
		p := payloads[i]
		if i%2 == 0 {
			p = fmt.Appendf(nil, "event %d, altered", i)
		}
		altered = append(altered, p)
	}
	altered = append(altered, []byte("event 1, altered")) // keys[1] again, altered
	ran := 0
	res, errs := other.With(dedupe.WithPayload(altered...)).DoEachResult(ctx, replay, func(context.Context, int) ([]byte, error) {
		ran++
		return nil, nil
	})
	for i, err := range errs {
		mismatch := i%2 == 0 || i == len(keys)
		switch {
		case mismatch && (!errors.Is(err, dedupe.ErrPayloadMismatch) || res[i] != nil):
			t.Errorf("replay %d (%s), altered: %q, %v; want nil, ErrPayloadMismatch", i, replay[i], res[i], err)
		case !mismatch && (errors.Is(err, dedupe.ErrPayloadMismatch) || !errors.Is(err, dedupe.ErrDuplicate) || string(res[i]) != fmt.Sprintf("reply %d", i)):
			t.Errorf("replay %d (%s), the same: %q, %v; want its reply, ErrDuplicate", i, replay[i], res[i], err)
		}
	}
	if ran != 0 {
		t.Errorf("the replayed batch ran fn %d times", ran)
	}
	errs = other.With(dedupe.WithPayload(payloads[0])).DoEach(ctx, keys[:2], func(context.Context, int) error { return nil })
	if !errors.Is(errs[0], dedupe.ErrInvalidKey) || !errors.Is(errs[1], dedupe.ErrInvalidKey) {
		t.Errorf("DoEach of 2 keys with 1 payload: %v; want ErrInvalidKey for each", errs)
	}
}

// payloadLongResult checks that a result as long as MaxResultSize leaves
// with the frame is kept whole, and that one longer is not kept but its
// fingerprint is.
func payloadLongResult(t *testing.T, s *suite, first, other *dedupe.Deduper) {
	t.Helper()
	ctx := context.Background()
	const overhead = 20 // the frame and the fingerprint
	for _, n := range []int{dedupe.MaxResultSize - overhead, dedupe.MaxResultSize} {
		k, long := s.key(), bytes.Repeat([]byte{0xff}, n)
		if _, err := first.With(dedupe.WithPayload([]byte("long"))).DoResult(ctx, k, func(context.Context) ([]byte, error) { return long, nil }); err != nil {
			t.Fatalf("DoResult with a result of %d bytes: %v", n, err)
		}
		want := long
		if n > dedupe.MaxResultSize-overhead {
			want = nil
		}
		res, err := other.With(dedupe.WithPayload([]byte("long"))).DoResult(ctx, k, nil)
		if !errors.Is(err, dedupe.ErrDuplicate) || errors.Is(err, dedupe.ErrPayloadMismatch) || !bytes.Equal(res, want) {
			t.Fatalf("a copy of a result of %d bytes: %d bytes, %v; want %d bytes, ErrDuplicate", n, len(res), err, len(want))
		}
		if _, err := other.With(dedupe.WithPayload([]byte("longer"))).DoResult(ctx, k, nil); !errors.Is(err, dedupe.ErrPayloadMismatch) {
			t.Fatalf("an altered copy of a result of %d bytes: %v; want ErrPayloadMismatch", n, err)
		}
	}
}
