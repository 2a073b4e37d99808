package dedupe_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var key1 = dedupe.Key{Channel: "telegram", MessageID: "1"}

func TestDoOnce(t *testing.T) {
	d := dedupe.New(nil)
	ctx := context.Background()
	runs := 0
	fn := func(context.Context) error { runs++; return nil }

	require.NoError(t, d.Do(ctx, key1, fn))
	require.ErrorIs(t, d.Do(ctx, key1, fn), dedupe.ErrDuplicate)
	assert.Equal(t, 1, runs)
	ok, err := d.Store().Exists(ctx, key1)
	require.NoError(t, err)
	assert.True(t, ok, "marked after success")

	s := d.Stats()
	assert.Equal(t, "memory", s.Backend)
	assert.Equal(t, uint64(1), s.Processed)
	assert.Equal(t, uint64(1), s.Duplicates)
	assert.Equal(t, uint64(2), s.Latency["claim"].Count)
	assert.Equal(t, uint64(1), s.Latency["mark"].Count)
}

func TestDoFailureReleases(t *testing.T) {
	d := dedupe.New(nil)
	ctx := context.Background()
	boom := errors.New("delivery failed")
	err := d.Do(ctx, key1, func(context.Context) error { return fmt.Errorf("send: %w", boom) })
	require.ErrorIs(t, err, boom, "fn's error is returned")
	ok, err := d.Store().Exists(ctx, key1)
	require.NoError(t, err)
	assert.False(t, ok, "not marked after failure")

	ran := false
	require.NoError(t, d.Do(ctx, key1, func(context.Context) error { ran = true; return nil }))
	assert.True(t, ran, "the platform's retry is processed")
	s := d.Stats()
	assert.Equal(t, uint64(1), s.Failed)
	assert.Equal(t, uint64(1), s.Processed)
}

func TestDoPanicReleases(t *testing.T) {
	d := dedupe.New(nil)
	func() {
		defer func() {
			assert.Equal(t, "kaboom", recover(), "the panic goes on")
		}()
		_ = d.Do(context.Background(), key1, func(context.Context) error { panic("kaboom") })
		assert.Fail(t, "Do returned after a panic")
	}()
	ran := false
	require.NoError(t, d.Do(context.Background(), key1, func(context.Context) error { ran = true; return nil }))
	assert.True(t, ran, "the key was released by the panic")
	assert.Equal(t, uint64(1), d.Stats().Failed)
}

func TestDoConcurrentCopies(t *testing.T) {
	d := dedupe.New(nil)
	const copies = 64
	var runs atomic.Int32
	entered, release := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, copies)
	wg.Add(1)
	go func() { // the copy that wins holds its claim until every other copy answered
		defer wg.Done()
		errs[0] = d.Do(context.Background(), key1, func(context.Context) error {
			runs.Add(1)
			close(entered)
			<-release
			return nil
		})
	}()
	<-entered
	var others sync.WaitGroup
	for i := 1; i < copies; i++ {
		others.Add(1)
		go func() {
			defer others.Done()
			errs[i] = d.Do(context.Background(), key1, func(context.Context) error { runs.Add(1); return nil })
		}()
	}
	others.Wait()
	close(release)
	wg.Wait()
	require.NoError(t, errs[0])
	for _, err := range errs[1:] {
		require.ErrorIs(t, err, dedupe.ErrInFlight)
	}
	assert.Equal(t, int32(1), runs.Load())
	assert.Equal(t, uint64(copies-1), d.Stats().InFlight)
	require.ErrorIs(t, d.Do(context.Background(), key1, func(context.Context) error { return nil }), dedupe.ErrDuplicate)
}

func TestDoRaceManyKeys(t *testing.T) {
	d := dedupe.New(nil)
	const keys, racers = 100, 16
	var runs [keys]atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < racers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < keys; i++ {
				k := dedupe.Key{Channel: "slack", MessageID: fmt.Sprint(i)}
				err := d.Do(context.Background(), k, func(context.Context) error { runs[i].Add(1); return nil })
				if err != nil && !errors.Is(err, dedupe.ErrDuplicate) && !errors.Is(err, dedupe.ErrInFlight) {
					assert.NoError(t, err)
				}
			}
		}()
	}
	wg.Wait()
	for i := range runs {
		assert.Equal(t, int32(1), runs[i].Load(), "key %d", i)
	}
}

func TestDoInvalidKeyAndStoreError(t *testing.T) {
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	d := dedupe.New(st)
	ran := false
	fn := func(context.Context) error { ran = true; return nil }
	require.ErrorIs(t, d.Do(context.Background(), dedupe.Key{Channel: "x"}, fn), dedupe.ErrInvalidKey)
	require.NoError(t, st.Close())
	require.ErrorIs(t, d.Do(context.Background(), key1, fn), dedupe.ErrClosed)
	assert.False(t, ran)
	assert.Equal(t, uint64(1), d.Stats().StoreErrors)
}

func TestDoMarksAfterCallerCancels(t *testing.T) {
	d := dedupe.New(nil)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, d.Do(ctx, key1, func(context.Context) error {
		cancel() // the client went away after delivery succeeded
		return nil
	}))
	require.ErrorIs(t, d.Do(context.Background(), key1, func(context.Context) error { return nil }), dedupe.ErrDuplicate)
}

func TestDoTTL(t *testing.T) {
	clock := dedupetest.NewClock(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: clock.Now})
	d := dedupe.New(st, dedupe.WithTTL(10*time.Minute))
	nop := func(context.Context) error { return nil }
	require.NoError(t, d.Do(context.Background(), key1, nop))
	clock.Advance(9 * time.Minute)
	require.ErrorIs(t, d.Do(context.Background(), key1, nop), dedupe.ErrDuplicate)
	clock.Advance(2 * time.Minute)
	require.NoError(t, d.Do(context.Background(), key1, nop), "processed again after the TTL")
}

func TestDoRenewsLease(t *testing.T) {
	for _, renew := range []bool{true, false} {
		t.Run(fmt.Sprint("renew=", renew), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
				opts := []dedupe.Option{dedupe.WithLease(3 * time.Second)}
				if !renew {
					opts = append(opts, dedupe.WithRenewal(-1))
				}
				d := dedupe.New(st, opts...)
				other := dedupe.New(st, dedupe.WithLease(3*time.Second))
				var second error
				err := d.Do(context.Background(), key1, func(context.Context) error {
					time.Sleep(10 * time.Second) // a long agent turn, in fake time
					second = other.Do(context.Background(), key1, func(context.Context) error { return nil })
					return nil
				})
				if renew {
					require.NoError(t, err)
					require.ErrorIs(t, second, dedupe.ErrInFlight, "the renewed claim still holds")
					assert.GreaterOrEqual(t, d.Stats().Latency["extend"].Count, uint64(3))
				} else {
					require.NoError(t, second, "the lapsed claim let a copy through")
					assert.Equal(t, uint64(0), d.Stats().Latency["extend"].Count)
				}
			})
		})
	}
}

func TestDoLeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(st, dedupe.WithLease(3*time.Second))
		require.NoError(t, d.Do(context.Background(), key1, func(ctx context.Context) error {
			// Someone else marks the key while we run: the renewal finds the claim gone.
			require.NoError(t, st.Mark(ctx, key1, time.Hour))
			time.Sleep(2 * time.Second)
			return nil
		}))
		assert.Equal(t, uint64(1), d.Stats().LeasesLost)
	})
}

func TestDoFailClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
		d := dedupe.New(st)
		defer d.Close()
		st.down.Store(true)
		ran := false
		err := d.Do(context.Background(), key1, func(context.Context) error { ran = true; return nil })
		require.ErrorIs(t, err, errServerGone)
		assert.False(t, ran)
		s := d.Stats()
		assert.Equal(t, uint64(1), s.Ambiguous, "a failed claim may have been written")
		assert.Equal(t, uint64(2), s.StoreErrors, "the claim, and the release by its token")

		st.down.Store(false)
		time.Sleep(time.Second) // the backlog retries the release meanwhile
		require.NoError(t, d.Do(context.Background(), key1, func(context.Context) error { ran = true; return nil }))
		assert.True(t, ran)
	})
}

// A mark that fails after fn succeeded leaves the claim to hold copies off,
// and the backlog writes the mark once the store answers again, so no copy
// runs after the lease either.
func TestDoMarkFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
		d := dedupe.New(st, dedupe.WithLease(time.Minute))
		defer d.Close()
		runs := 0
		err := d.Do(context.Background(), key1, func(context.Context) error {
			runs++
			st.down.Store(true) // the server goes away during delivery
			return nil
		})
		require.ErrorIs(t, err, errServerGone)
		assert.Contains(t, err.Error(), "processed but not marked")
		st.down.Store(false)
		require.ErrorIs(t, d.Do(context.Background(), key1, func(context.Context) error { runs++; return nil }), dedupe.ErrDuplicate,
			"processed here, its mark queued")
		time.Sleep(5 * time.Second) // the backlog retries meanwhile
		s := d.Stats()
		assert.Equal(t, uint64(1), s.Deferred)
		assert.Equal(t, uint64(1), s.Replayed)
		time.Sleep(2 * time.Minute) // past the lease
		require.ErrorIs(t, d.Do(context.Background(), key1, func(context.Context) error { runs++; return nil }), dedupe.ErrDuplicate)
		assert.Equal(t, 1, runs)
	})
}

// A mark the store does not take for longer than the claim's lease: the
// claim runs out on the store, but this Deduper remembers the message was
// processed and never runs it again; once the mark is written the store
// answers for itself.
func TestDoMarkPendingOutlivesLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
		d := dedupe.New(st, dedupe.WithLease(30*time.Second))
		defer d.Close()
		runs := 0
		st.marksFail.Store(true)
		require.ErrorIs(t, d.Do(context.Background(), key1, func(context.Context) error { runs++; return nil }), errServerGone)
		time.Sleep(time.Minute) // the lease ran out; the backlog keeps trying
		require.ErrorIs(t, d.Do(context.Background(), key1, func(context.Context) error { runs++; return nil }), dedupe.ErrDuplicate)
		assert.Equal(t, 1, runs)

		st.marksFail.Store(false)
		require.NoError(t, d.Flush(context.Background()))
		assert.True(t, exists(t, st.Store, key1))
		other := dedupe.New(st) // another instance: the store knows now
		require.ErrorIs(t, other.Do(context.Background(), key1, func(context.Context) error { runs++; return nil }), dedupe.ErrDuplicate)
		assert.Equal(t, 1, runs)
	})
}

// A mark that fails for a moment after fn succeeded is tried again within Do:
// the caller gets nil and nothing is left for the backlog.
func TestDoMarkRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
		d := dedupe.New(st)
		defer d.Close()
		require.NoError(t, d.Do(context.Background(), key1, func(context.Context) error {
			st.failNext.Store(2)
			st.lostNext.Store(1) // the third attempt writes, but its reply is lost
			return nil
		}))
		assert.Zero(t, d.Stats().Deferred)
		assert.True(t, exists(t, st.Store, key1))
	})
}

// Flush waits for the marks queued while the store was down, and gives up
// with ctx.
func TestDeduperFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
		d := dedupe.New(st)
		defer d.Close()
		require.NoError(t, d.Flush(context.Background()), "nothing queued")
		err := d.Do(context.Background(), key1, func(context.Context) error {
			st.down.Store(true)
			return nil
		})
		require.ErrorIs(t, err, errServerGone)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		require.ErrorIs(t, d.Flush(ctx), context.DeadlineExceeded, "the store is still down")
		cancel()
		st.down.Store(false)
		require.NoError(t, d.Flush(context.Background()))
		assert.Equal(t, uint64(1), d.Stats().Replayed)
		assert.True(t, exists(t, st.Store, key1))
	})
}

func TestDoLogs(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := dedupe.New(nil, dedupe.WithLogger(logger))
	ctx := dedupe.ContextWithTraceID(context.Background(), "trace-42")
	require.NoError(t, d.Do(ctx, key1, func(context.Context) error { return nil }))
	require.ErrorIs(t, d.Do(ctx, key1, func(context.Context) error { return nil }), dedupe.ErrDuplicate)
	out := buf.String()
	assert.Regexp(t, `level=DEBUG msg="dedupe: decision" trace_id=trace-42 platform=telegram message_id=1 dedup_phase=memory processing_time=\S+ result=processed\n`, out)
	assert.Regexp(t, `level=DEBUG msg="dedupe: decision" trace_id=trace-42 platform=telegram message_id=1 dedup_phase=memory processing_time=\S+ result=duplicate\n`, out)
	assert.Equal(t, 2, strings.Count(out, "\n"), "one record per decision")

	buf.Reset()
	st := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	st.down.Store(true)
	d = dedupe.New(st, dedupe.WithLogger(logger))
	_ = d.Do(context.Background(), key1, func(context.Context) error { return nil })
	assert.Contains(t, buf.String(), `level=WARN msg="dedupe: store error" key=telegram:1 backend=memory phase=claim error=`)
	assert.Contains(t, buf.String(), `result=store_error`)

	buf.Reset()
	fb := dedupe.New(st, dedupe.WithLogger(logger), dedupe.WithFallback(dedupe.NewMemoryStore(dedupe.MemoryConfig{})))
	defer fb.Close()
	require.NoError(t, fb.Do(context.Background(), key1, func(context.Context) error { return nil }))
	assert.Regexp(t, `msg="dedupe: decision" trace_id="" platform=telegram message_id=1 dedup_phase=fallback processing_time=\S+ result=processed\n`, buf.String())
}

func TestStatsLatencyBuckets(t *testing.T) {
	d := dedupe.New(nil)
	for i := 0; i < 10; i++ {
		_ = d.Do(context.Background(), dedupe.Key{Channel: "x", MessageID: fmt.Sprint(i)}, func(context.Context) error { return nil })
	}
	l := d.Stats().Latency["claim"]
	assert.Equal(t, uint64(10), l.Count)
	last := l.Buckets[len(l.Buckets)-1]
	assert.Equal(t, uint64(10), last, "every memory call takes under 5 s")
	for i := 1; i < len(l.Buckets); i++ {
		assert.GreaterOrEqual(t, l.Buckets[i], l.Buckets[i-1], "cumulative")
	}
	assert.Greater(t, l.Sum, time.Duration(0))
}

func TestDoRenewsAfterCallerCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(st, dedupe.WithLease(3*time.Second))
		ctx, cancel := context.WithCancel(context.Background())
		var copyErr error
		require.NoError(t, d.Do(ctx, key1, func(context.Context) error {
			cancel()                     // the platform timed out and hung up
			time.Sleep(10 * time.Second) // but the handler goes on
			copyErr = d.Do(context.Background(), key1, func(context.Context) error { return nil })
			return nil
		}))
		require.ErrorIs(t, copyErr, dedupe.ErrInFlight, "the claim was renewed after the caller left")
	})
}

// A Claim whose reply was lost is asked again with the same token: the store
// took it the first time, and the second answer says it is the caller's.
func TestDoRetriesAmbiguousClaim(t *testing.T) {
	st := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	d := dedupe.New(st)
	defer d.Close()
	st.loseNext(1)
	runs := 0
	require.NoError(t, d.Do(context.Background(), key1, func(context.Context) error { runs++; return nil }))
	assert.Equal(t, 1, runs)
	assert.Equal(t, uint64(1), d.Stats().Ambiguous)
	require.ErrorIs(t, d.Do(context.Background(), key1, func(context.Context) error { runs++; return nil }), dedupe.ErrDuplicate)
}

// deadlineStore takes each claim and then reports the caller's deadline as
// passed: the claim committed, the caller gave up before the reply.
type deadlineStore struct{ dedupe.Store }

func (s deadlineStore) Claim(ctx context.Context, c dedupe.Claim, lease time.Duration) (dedupe.Status, error) {
	if _, err := s.Store.Claim(ctx, c, lease); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("dedupe: test: claim %s: %w", c.Key, context.DeadlineExceeded)
}

// A Claim that committed after the caller's deadline strands nothing: Do
// releases it by its token, and the platform's retry is processed at once.
func TestDoReleasesAmbiguousClaim(t *testing.T) {
	mem := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	d := dedupe.New(deadlineStore{mem})
	err := d.Do(context.Background(), key1, func(context.Context) error { assert.Fail(t, "ran"); return nil })
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, uint64(1), d.Stats().Ambiguous)
	require.NoError(t, dedupe.New(mem).Do(context.Background(), key1, func(context.Context) error { return nil }),
		"the retry is not refused as in flight")
}

// A renewal interval longer than half the lease is clamped to a third of it:
// the claim never lapses while fn runs, so no copy runs beside it.
func TestDoRenewalClamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(st, dedupe.WithLease(300*time.Millisecond), dedupe.WithRenewal(400*time.Millisecond))
		var runs, running, most atomic.Int32
		fn := func(context.Context) error {
			runs.Add(1)
			n := running.Add(1)
			if n > most.Load() {
				most.Store(n)
			}
			time.Sleep(3 * time.Second)
			running.Add(-1)
			return nil
		}
		var wg sync.WaitGroup
		for i := 0; i < 30; i++ {
			wg.Go(func() { _ = d.Do(context.Background(), key1, fn) })
			time.Sleep(100 * time.Millisecond)
		}
		wg.Wait()
		assert.Equal(t, int32(1), runs.Load(), "one message, one run")
		assert.Equal(t, int32(1), most.Load())
		assert.Zero(t, d.Stats().LeasesLost)
	})
}

// With shares the store and the counters, with its own TTL.
func TestDoWith(t *testing.T) {
	clock := dedupetest.NewClock(time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC))
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{Now: clock.Now})
	d := dedupe.New(st, dedupe.WithTTL(time.Hour))
	short := d.With(dedupe.WithTTL(time.Minute))
	nop := func(context.Context) error { return nil }
	k2 := dedupe.Key{Channel: "slack", MessageID: "2"}
	require.NoError(t, d.Do(context.Background(), key1, nop))
	require.NoError(t, short.Do(context.Background(), k2, nop))
	require.ErrorIs(t, short.Do(context.Background(), key1, nop), dedupe.ErrDuplicate, "one store")
	clock.Advance(2 * time.Minute)
	require.ErrorIs(t, d.Do(context.Background(), key1, nop), dedupe.ErrDuplicate, "an hour's TTL")
	require.NoError(t, d.Do(context.Background(), k2, nop), "a minute's TTL ran out")
	s := d.Stats()
	assert.Equal(t, uint64(3), s.Processed, "one set of counters")
	assert.Equal(t, s, short.Stats())
}

// A decision that ended in an error carries it: the failed record says why
// fn failed (or that it panicked), the store_error record what the store
// said; a processed or duplicate record has no error field (issue 34, item 11).
func TestDecisionRecordCarriesError(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	d := dedupe.New(nil, dedupe.WithLogger(logger))
	boom := errors.New("AI core unavailable")
	require.ErrorIs(t, d.Do(context.Background(), key1, func(context.Context) error { return boom }), boom)
	assert.Regexp(t, `msg="dedupe: decision" .* result=failed error="AI core unavailable"\n`, buf.String())

	buf.Reset()
	require.Panics(t, func() {
		_ = d.Do(context.Background(), key(2), func(context.Context) error { panic("handler bug") })
	})
	assert.Regexp(t, `result=failed error="dedupe: fn panicked or called runtime.Goexit"\n`, buf.String())

	buf.Reset()
	require.NoError(t, d.Do(context.Background(), key1, nop))
	assert.Regexp(t, `result=processed\n`, buf.String())
	assert.NotContains(t, buf.String(), "error=")

	buf.Reset()
	st := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	st.down.Store(true)
	_ = dedupe.New(st, dedupe.WithLogger(logger)).Do(context.Background(), key1, nop)
	assert.Regexp(t, `msg="dedupe: decision" .* result=store_error error=`, buf.String())
}
