package dedupetest

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The tests of results kept with marks ([dedupe.Store.MarkResult]).

// resultStore opens a store with the default options.
func (s *suite) resultStore(t *testing.T) dedupe.Store {
	t.Helper()
	return s.open(t, Options{})
}

// wantResult checks Result(k) against the result and the marked flag wanted.
func wantResult(t *testing.T, rs dedupe.Store, k dedupe.Key, want []byte, wantMarked bool, when string) {
	t.Helper()
	got, marked, err := rs.Result(context.Background(), k)
	if err != nil {
		t.Fatalf("Result(%s) %s: %v", k, when, err)
	}
	if marked != wantMarked || !bytes.Equal(got, want) || (want == nil) != (got == nil) {
		t.Fatalf("Result(%s) %s = %.40q (%d bytes), marked %v; want %.40q (%d bytes), marked %v",
			k, when, got, len(got), marked, want, len(want), wantMarked)
	}
}

func markResult(t *testing.T, rs dedupe.Store, k dedupe.Key, res []byte, ttl time.Duration) {
	t.Helper()
	if err := rs.MarkResult(context.Background(), k, res, ttl); err != nil {
		t.Fatalf("MarkResult(%s, %d bytes): %v", k, len(res), err)
	}
}

// testResultRoundTrip keeps binary results of every size up to the limit,
// and tells them from unmarked, claimed and plainly marked keys.
func testResultRoundTrip(t *testing.T, s *suite) {
	rs := s.resultStore(t)
	full := bytes.Repeat([]byte{0, 0xff, '\r', '\n', '"', 0x80}, dedupe.MaxResultSize/6+1)[:dedupe.MaxResultSize]
	for _, res := range [][]byte{{0}, []byte("HTTP/1.1 200 OK\r\n\r\n{}"), full} {
		k := s.key()
		markResult(t, rs, k, res, s.d(10*time.Minute))
		wantResult(t, rs, k, res, true, "after MarkResult")
		wantExists(t, rs, k, true, "after MarkResult")
		claim(t, rs, k, s.d(10*time.Minute), dedupe.Duplicate)
		wantResult(t, rs, k, res, true, "after a Claim of the marked key")
	}
	wantResult(t, rs, s.key(), nil, false, "of an unmarked key")
	held := claim(t, rs, s.key(), s.d(10*time.Minute), dedupe.Claimed)
	wantResult(t, rs, held.Key, nil, false, "of a claimed key")
	plain := s.key()
	mark(t, rs, plain, s.d(10*time.Minute))
	wantResult(t, rs, plain, nil, true, "of a key marked without a result")
	empty := s.key()
	markResult(t, rs, empty, []byte{}, s.d(10*time.Minute))
	wantResult(t, rs, empty, nil, true, "of a key marked with an empty result")
}

// testResultTooLarge refuses a result over MaxResultSize, writing nothing.
func testResultTooLarge(t *testing.T, s *suite) {
	rs := s.resultStore(t)
	k := s.key()
	err := rs.MarkResult(context.Background(), k, make([]byte, dedupe.MaxResultSize+1), s.d(10*time.Minute))
	wantErr(t, err, dedupe.ErrTooLarge, "MarkResult of MaxResultSize+1 bytes")
	wantExists(t, rs, k, false, "after a refused MarkResult")
	claim(t, rs, k, s.d(10*time.Minute), dedupe.Claimed)
}

// testResultLifetime: a result expires with its mark, goes with a later
// Mark, is replaced by a later MarkResult, and is the store's own copy.
func testResultLifetime(t *testing.T, s *suite) {
	rs := s.resultStore(t)
	expiring, remarked, replaced := s.key(), s.key(), s.key()
	res := []byte("first answer")
	markResult(t, rs, expiring, res, s.d(10*time.Minute))
	markResult(t, rs, remarked, res, s.d(10*time.Minute))
	markResult(t, rs, replaced, res, s.d(10*time.Minute))
	res[0] = 'F' // the caller's slice is the caller's
	want := []byte("first answer")
	got, _, err := rs.Result(context.Background(), expiring)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Result after the caller changed its slice = %q, %v; want %q", got, err, want)
	}
	got[0] = 'X' // and so is the slice Result returns
	wantResult(t, rs, expiring, want, true, "after the caller changed Result's slice")

	mark(t, rs, remarked, s.d(20*time.Minute))
	wantResult(t, rs, remarked, nil, true, "after a Mark over MarkResult")
	markResult(t, rs, replaced, []byte("second"), s.d(20*time.Minute))
	wantResult(t, rs, replaced, []byte("second"), true, "after a second MarkResult")

	s.wait(5 * time.Minute)
	wantResult(t, rs, expiring, want, true, "halfway through its TTL")
	s.wait(8 * time.Minute)
	wantResult(t, rs, expiring, nil, false, "after its TTL")
	wantResult(t, rs, replaced, []byte("second"), true, "within the second MarkResult's TTL")
}

// testResultClearsClaim: MarkResult clears a claim, as Mark does.
func testResultClearsClaim(t *testing.T, s *suite) {
	rs := s.resultStore(t)
	k := s.key()
	c := claim(t, rs, k, s.d(10*time.Minute), dedupe.Claimed)
	markResult(t, rs, k, []byte("done"), s.d(20*time.Minute))
	claim(t, rs, k, s.d(10*time.Minute), dedupe.Duplicate)
	wantErr(t, rs.Release(context.Background(), c), dedupe.ErrNotOwner, "Release after MarkResult")
	wantResult(t, rs, k, []byte("done"), true, "after a Release of the old claim")
}

// testResultInputs: invalid keys, a closed store, a cancelled context.
func testResultInputs(t *testing.T, s *suite) {
	rs := s.resultStore(t)
	ctx := context.Background()
	bad := dedupe.Key{Channel: "conformance", MessageID: ""}
	wantErr(t, rs.MarkResult(ctx, bad, []byte("x"), time.Hour), dedupe.ErrInvalidKey, "MarkResult of an invalid key")
	_, _, err := rs.Result(ctx, bad)
	wantErr(t, err, dedupe.ErrInvalidKey, "Result of an invalid key")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	k := s.key()
	wantErr(t, rs.MarkResult(cancelled, k, []byte("x"), time.Hour), context.Canceled, "MarkResult with a cancelled context")
	wantExists(t, rs, k, false, "after a cancelled MarkResult")
	_, _, err = rs.Result(cancelled, k)
	wantErr(t, err, context.Canceled, "Result with a cancelled context")

	if err := rs.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wantErr(t, rs.MarkResult(ctx, k, []byte("x"), time.Hour), dedupe.ErrClosed, "MarkResult after Close")
	_, _, err = rs.Result(ctx, k)
	wantErr(t, err, dedupe.ErrClosed, "Result after Close")
}

// testDeduperResult runs DoResult over the store: the first run's result
// reaches a copy that waited for it and copies that came later, and fn
// runs once.
func testDeduperResult(t *testing.T, s *suite) {
	rs := s.resultStore(t)
	d := dedupe.New(rs, dedupe.WithWait(time.Minute), dedupe.WithLease(time.Hour))
	t.Cleanup(func() { _ = d.Close() })
	k := s.key()
	want := []byte("the first run's reply \x00\xff")
	var runs atomic.Int32
	fn := func(context.Context) ([]byte, error) {
		runs.Add(1)
		for d.Stats().Waits == 0 {
			time.Sleep(time.Millisecond) // hold on until a copy waits
		}
		return bytes.Clone(want), nil
	}
	started := make(chan struct{})
	var wg sync.WaitGroup
	var ownerRes, copyRes []byte
	var ownerErr, copyErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		ownerRes, ownerErr = d.DoResult(context.Background(), k, func(ctx context.Context) ([]byte, error) {
			close(started)
			return fn(ctx)
		})
	}()
	<-started
	copyRes, copyErr = d.DoResult(context.Background(), k, fn)
	wg.Wait()
	if ownerErr != nil || !bytes.Equal(ownerRes, want) {
		t.Fatalf("owner: %q, %v; want %q, nil", ownerRes, ownerErr, want)
	}
	if !errors.Is(copyErr, dedupe.ErrDuplicate) || !bytes.Equal(copyRes, want) {
		t.Fatalf("copy that waited: %q, %v; want %q, ErrDuplicate", copyRes, copyErr, want)
	}
	later, err := d.DoResult(context.Background(), k, fn)
	if !errors.Is(err, dedupe.ErrDuplicate) || !bytes.Equal(later, want) {
		t.Fatalf("later copy: %q, %v; want %q, ErrDuplicate", later, err, want)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want 1", n)
	}
}
