package dedupe_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue 44, item 15: a redelivery that reuses a processed message's id with
// other content was silently a duplicate. On a real SQLite file, ten
// messages are processed by one gateway and replayed, altered, through
// another: each altered replay is refused with ErrPayloadMismatch (and
// ErrDuplicate), counted and logged, and fn is not run again; replays whose
// JSON differs only in layout are duplicates. (On main, with the key alone,
// the ten altered replays were ten silent duplicates.)
func TestPayloadAlteredReplays(t *testing.T) {
	st := openSQLite(t, filepath.Join(t.TempDir(), "dedupe.db"), dedupe.SQLiteConfig{})
	var logs bytes.Buffer
	first := dedupe.New(st, dedupe.WithPayloadCheck())
	other := dedupe.New(st, dedupe.WithPayloadCheck(), dedupe.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	t.Cleanup(func() { _, _ = first.Close(), other.Close() })
	ctx := context.Background()
	var runs atomic.Int32
	fn := func(context.Context) error { runs.Add(1); return nil }
	const n = 10
	for i := range n {
		body := fmt.Appendf(nil, `{"update_id":%d,"message":{"text":"pay 10 EUR to alice"}}`, i)
		require.NoError(t, first.With(dedupe.WithPayload(body)).Do(ctx, key(i), fn))
	}
	mismatches, duplicates := 0, 0
	for i := range n {
		altered := fmt.Appendf(nil, `{"update_id":%d,"message":{"text":"pay 9000 EUR to mallory"}}`, i)
		err := other.With(dedupe.WithPayload(altered)).Do(ctx, key(i), fn)
		if assert.ErrorIs(t, err, dedupe.ErrPayloadMismatch, "altered replay %d", i) {
			mismatches++
		}
		assert.ErrorIs(t, err, dedupe.ErrDuplicate, "an altered replay is a copy too: it is acknowledged, not run")
		same := fmt.Appendf(nil, "{ \"message\": {\"text\": \"pay 10 EUR to alice\"},\n \"update_id\": %d }", i)
		err = other.With(dedupe.WithPayload(same)).Do(ctx, key(i), fn)
		if assert.ErrorIs(t, err, dedupe.ErrDuplicate, "replay %d, the same JSON", i) && assert.NotErrorIs(t, err, dedupe.ErrPayloadMismatch) {
			duplicates++
		}
	}
	t.Logf("%d/%d altered replays refused with ErrPayloadMismatch; %d/%d identical replays duplicates", mismatches, n, duplicates, n)
	assert.Equal(t, int32(n), runs.Load(), "fn ran once per message")
	s := other.Stats()
	assert.Equal(t, uint64(n), s.PayloadMismatches)
	assert.Equal(t, uint64(n), s.Duplicates, "mismatches are not counted as duplicates")
	assert.Zero(t, s.PayloadUnverified)
	assert.Equal(t, n, bytes.Count(logs.Bytes(), []byte("level=WARN msg=\"dedupe: a copy's payload differs")), "one warning per altered replay: %s", logs.String())
}

// Without WithPayloadCheck nothing changes: payloads are not asked for, a
// copy is a duplicate whatever it holds, and a result is kept and handed
// back as given, even one that looks like the check's frame.
func TestPayloadCheckOffByDefault(t *testing.T) {
	d := dedupe.New(nil)
	t.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	framed := append([]byte("\xffDP\x01"), bytes.Repeat([]byte{7}, 30)...)
	_, err := d.DoResult(ctx, key(1), func(context.Context) ([]byte, error) { return framed, nil })
	require.NoError(t, err)
	res, err := d.DoResult(ctx, key(1), reply("never"))
	require.ErrorIs(t, err, dedupe.ErrDuplicate)
	assert.Equal(t, framed, res, "the result as kept")
	assert.Zero(t, d.Stats().PayloadMismatches+d.Stats().PayloadUnverified)
	got, _, err := d.Store().Result(ctx, key(1))
	require.NoError(t, err)
	assert.Equal(t, framed, got, "the store holds the result alone")
}

// Marks without a fingerprint match every payload: those made before the
// check was on (with and without a result) and by a call without a payload.
// Their copies are duplicates with their results, counted as unverified.
func TestPayloadUnverifiedMarks(t *testing.T) {
	st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
	ctx := context.Background()
	before := dedupe.New(st)
	_, err := before.DoResult(ctx, key(1), reply("old answer"))
	require.NoError(t, err)
	require.NoError(t, before.Do(ctx, key(2), func(context.Context) error { return nil }))
	d := dedupe.New(st, dedupe.WithPayloadCheck())
	t.Cleanup(func() { _, _ = before.Close(), d.Close() })
	_, err = d.DoResult(ctx, key(3), reply("no payload given"))
	require.NoError(t, err)

	for i, want := range map[int]string{1: "old answer", 2: "", 3: "no payload given"} {
		res, err := d.With(dedupe.WithPayload([]byte("anything"))).DoResult(ctx, key(i), reply("never"))
		require.ErrorIs(t, err, dedupe.ErrDuplicate, "key %d", i)
		assert.NotErrorIs(t, err, dedupe.ErrPayloadMismatch, "key %d", i)
		assert.Equal(t, want, string(res), "key %d", i)
	}
	assert.Equal(t, uint64(3), d.Stats().PayloadUnverified)
	assert.Zero(t, d.Stats().PayloadMismatches)
}

// WithPayload with another number of payloads than the call has keys
// refuses the call and runs nothing; WithPayload() takes them away.
func TestPayloadCount(t *testing.T) {
	d := dedupe.New(nil, dedupe.WithPayloadCheck())
	t.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	ran := false
	fn := func(context.Context) error { ran = true; return nil }
	err := d.With(dedupe.WithPayload([]byte("a"), []byte("b"))).Do(ctx, key(1), fn)
	require.ErrorIs(t, err, dedupe.ErrInvalidKey)
	errs := d.With(dedupe.WithPayload([]byte("a"))).DoEach(ctx, []dedupe.Key{key(1), key(2)}, func(context.Context, int) error { ran = true; return nil })
	require.ErrorIs(t, errs[0], dedupe.ErrInvalidKey)
	require.ErrorIs(t, errs[1], dedupe.ErrInvalidKey)
	assert.False(t, ran)

	withA := d.With(dedupe.WithPayload([]byte("a")))
	require.NoError(t, withA.Do(ctx, key(1), fn))
	require.ErrorIs(t, withA.With(dedupe.WithPayload([]byte("b"))).Do(ctx, key(1), fn), dedupe.ErrPayloadMismatch)
	err = withA.With(dedupe.WithPayload()).Do(ctx, key(1), fn)
	require.ErrorIs(t, err, dedupe.ErrDuplicate)
	assert.NotErrorIs(t, err, dedupe.ErrPayloadMismatch, "no payload: not compared")
}

// A differing copy that arrives while the first is in flight gets
// ErrInFlight, as without the check; one that waits (WithWait) is compared
// once the owner has marked the message.
func TestPayloadInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := dedupe.New(nil, dedupe.WithPayloadCheck())
		defer d.Close()
		ctx := context.Background()
		started, finish := make(chan struct{}), make(chan struct{})
		done := make(chan error)
		go func() {
			done <- d.With(dedupe.WithPayload([]byte("first"))).Do(ctx, key(1), func(context.Context) error {
				close(started)
				<-finish
				return nil
			})
		}()
		<-started
		never := func(context.Context) error { t.Error("a copy ran"); return nil }
		require.ErrorIs(t, d.With(dedupe.WithPayload([]byte("second"))).Do(ctx, key(1), never), dedupe.ErrInFlight)
		waited := make(chan error)
		go func() {
			waited <- d.With(dedupe.WithPayload([]byte("second")), dedupe.WithWait(time.Minute)).Do(ctx, key(1), never)
		}()
		synctest.Wait()
		close(finish)
		require.NoError(t, <-done)
		err := <-waited
		require.ErrorIs(t, err, dedupe.ErrPayloadMismatch)
		assert.Equal(t, uint64(1), d.Stats().WaitsDuplicate)
	})
}

// In one DoEach batch, a key held twice is compared at its second place
// with the payload its first place was processed with.
func TestPayloadEachRepeats(t *testing.T) {
	d := dedupe.New(nil, dedupe.WithPayloadCheck())
	t.Cleanup(func() { _ = d.Close() })
	ctx := context.Background()
	keys := []dedupe.Key{key(1), key(2), key(1), key(2)}
	payloads := [][]byte{[]byte(`{"a":1,"b":2}`), []byte("two"), []byte(`{"b":2,"a":1}`), []byte("two, altered")}
	var runs atomic.Int32
	errs := d.With(dedupe.WithPayload(payloads...)).DoEach(ctx, keys, func(context.Context, int) error { runs.Add(1); return nil })
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.ErrorIs(t, errs[2], dedupe.ErrDuplicate)
	assert.NotErrorIs(t, errs[2], dedupe.ErrPayloadMismatch, "the same JSON value")
	require.ErrorIs(t, errs[3], dedupe.ErrPayloadMismatch)
	assert.Equal(t, int32(2), runs.Load())

	// A later batch whose first place differs and whose second matches.
	errs = d.With(dedupe.WithPayload([]byte("two, altered"), []byte("two"))).DoEach(ctx, []dedupe.Key{key(2), key(2)}, func(context.Context, int) error { runs.Add(1); return nil })
	require.ErrorIs(t, errs[0], dedupe.ErrPayloadMismatch)
	require.ErrorIs(t, errs[1], dedupe.ErrDuplicate)
	assert.NotErrorIs(t, errs[1], dedupe.ErrPayloadMismatch)
	assert.Equal(t, int32(2), runs.Load())
	assert.Equal(t, uint64(2), d.Stats().PayloadMismatches)
}

// A mark queued in the backlog (the store did not take it) keeps its
// fingerprint there: a differing copy is told apart before the store has
// the mark, and the store gets the fingerprint with it.
func TestPayloadQueuedMark(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := newFlakyResults()
		d := dedupe.New(st, dedupe.WithPayloadCheck())
		defer d.Close()
		ctx := context.Background()
		st.marksFail.Store(true)
		_, err := d.With(dedupe.WithPayload([]byte("first"))).DoResult(ctx, key(1), reply("answer"))
		require.Error(t, err, "the mark did not land within Do's wait")
		_, err = d.With(dedupe.WithPayload([]byte("second"))).DoResult(ctx, key(1), reply("never"))
		require.ErrorIs(t, err, dedupe.ErrPayloadMismatch, "compared with the queued mark")
		errs := d.With(dedupe.WithPayload([]byte("second"))).DoEach(ctx, []dedupe.Key{key(1)}, func(context.Context, int) error { return nil })
		require.ErrorIs(t, errs[0], dedupe.ErrPayloadMismatch, "DoEach too")
		res, err := d.With(dedupe.WithPayload([]byte("first"))).DoResult(ctx, key(1), reply("never"))
		require.ErrorIs(t, err, dedupe.ErrDuplicate)
		assert.Equal(t, "answer", string(res))

		st.marksFail.Store(false)
		require.NoError(t, d.Flush(ctx))
		other := dedupe.New(st.Store, dedupe.WithPayloadCheck())
		defer other.Close()
		_, err = other.With(dedupe.WithPayload([]byte("second"))).DoResult(ctx, key(1), reply("never"))
		require.ErrorIs(t, err, dedupe.ErrPayloadMismatch, "the store got the fingerprint with the mark")
	})
}
