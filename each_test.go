package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// oneKeyStore hides the batch calls of a store: DoEach asks it one key at a
// time.
type oneKeyStore struct{ dedupe.Store }

// eachStores are the stores the DoEach tests run on: the memory and SQLite
// stores, and the memory store asked one key at a time.
func eachStores(t *testing.T) map[string]func() dedupe.Store {
	return map[string]func() dedupe.Store{
		"memory":  func() dedupe.Store { return dedupe.NewMemoryStore(dedupe.MemoryConfig{}) },
		"sqlite":  func() dedupe.Store { return openSQLite(t, filepath.Join(t.TempDir(), "d.db"), dedupe.SQLiteConfig{}) },
		"one-key": func() dedupe.Store { return oneKeyStore{dedupe.NewMemoryStore(dedupe.MemoryConfig{})} },
	}
}

func eachKeys(ch string, ids ...string) []dedupe.Key {
	keys := make([]dedupe.Key, len(ids))
	for i, id := range ids {
		keys[i] = dedupe.Key{Channel: ch, MessageID: id}
	}
	return keys
}

// TestDoEachSorts runs a batch holding a new key, a marked one, one another
// caller holds, an invalid one and a repeat: each gets what Do would say.
func TestDoEachSorts(t *testing.T) {
	for name, open := range eachStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open()
			defer st.Close()
			ctx := context.Background()
			d := dedupe.New(st)
			keys := eachKeys("line", "new", "marked", "held", "", "new")
			require.NoError(t, st.Mark(ctx, keys[1], 0))
			status, err := st.Claim(ctx, dedupe.NewClaim(keys[2]), time.Minute)
			require.NoError(t, err)
			require.Equal(t, dedupe.Claimed, status)

			var ran []int
			errs := d.DoEach(ctx, keys, func(_ context.Context, i int) error { ran = append(ran, i); return nil })
			require.Len(t, errs, 5)
			assert.Equal(t, []int{0}, ran, "only the new key runs, once")
			assert.NoError(t, errs[0])
			assert.ErrorIs(t, errs[1], dedupe.ErrDuplicate)
			assert.ErrorIs(t, errs[2], dedupe.ErrInFlight)
			assert.ErrorIs(t, errs[3], dedupe.ErrInvalidKey)
			assert.ErrorIs(t, errs[4], dedupe.ErrDuplicate, "a repeat of a processed key")
			ok, err := st.Exists(ctx, keys[0])
			require.NoError(t, err)
			assert.True(t, ok, "processed key marked")

			s := d.Stats()
			assert.Equal(t, uint64(1), s.Processed)
			assert.Equal(t, uint64(2), s.Duplicates)
			assert.Equal(t, uint64(1), s.InFlight)
		})
	}
}

// TestDoEachRedelivery fails some keys of a batch and redelivers it: only
// those run again, and a third delivery runs nothing.
func TestDoEachRedelivery(t *testing.T) {
	for name, open := range eachStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open()
			defer st.Close()
			ctx := context.Background()
			d := dedupe.New(st)
			keys := make([]dedupe.Key, 40)
			for i := range keys {
				keys[i] = dedupe.Key{Channel: "meta", MessageID: "wamid." + strconv.Itoa(i)}
			}
			runs := make([]int, len(keys))
			boom := errors.New("model unavailable")
			fn := func(fail bool) func(context.Context, int) error {
				return func(_ context.Context, i int) error {
					runs[i]++
					if fail && i%3 == 0 {
						return fmt.Errorf("event %d: %w", i, boom)
					}
					return nil
				}
			}
			errs := d.DoEach(ctx, keys, fn(true))
			for i, err := range errs {
				if i%3 == 0 {
					assert.ErrorIs(t, err, boom, "key %d", i)
				} else {
					assert.NoError(t, err, "key %d", i)
				}
			}
			errs = d.DoEach(ctx, keys, fn(false))
			for i, err := range errs {
				if i%3 == 0 {
					assert.NoError(t, err, "failed key %d runs again", i)
				} else {
					assert.ErrorIs(t, err, dedupe.ErrDuplicate, "key %d", i)
				}
			}
			for _, err := range d.DoEach(ctx, keys, fn(false)) {
				assert.ErrorIs(t, err, dedupe.ErrDuplicate)
			}
			for i, n := range runs {
				want := 1
				if i%3 == 0 {
					want = 2
				}
				assert.Equal(t, want, n, "runs of key %d", i)
			}
		})
	}
}

// TestDoEachResult keeps each key's result with its mark and gives it to
// the copies of a later batch.
func TestDoEachResult(t *testing.T) {
	for name, open := range eachStores(t) {
		t.Run(name, func(t *testing.T) {
			st := open()
			defer st.Close()
			ctx := context.Background()
			d := dedupe.New(st)
			keys := eachKeys("discord", "a", "b", "c")
			fn := func(_ context.Context, i int) ([]byte, error) {
				if i == 1 {
					return nil, nil
				}
				return []byte("reply " + keys[i].MessageID), nil
			}
			res, errs := d.DoEachResult(ctx, keys, fn)
			require.Equal(t, []error{nil, nil, nil}, errs)
			assert.Equal(t, [][]byte{[]byte("reply a"), nil, []byte("reply c")}, res)

			res, errs = d.DoEachResult(ctx, append(keys, keys[0]), func(context.Context, int) ([]byte, error) {
				t.Error("fn ran for a duplicate")
				return nil, nil
			})
			for _, err := range errs {
				assert.ErrorIs(t, err, dedupe.ErrDuplicate)
			}
			assert.Equal(t, [][]byte{[]byte("reply a"), nil, []byte("reply c"), []byte("reply a")}, res)
		})
	}
}

// TestDoEachConcurrency runs the fns of a batch up to the concurrency at
// once, and one after another, in order, by default.
func TestDoEachConcurrency(t *testing.T) {
	ctx := context.Background()
	keys := make([]dedupe.Key, 32)
	for i := range keys {
		keys[i] = dedupe.Key{Channel: "c", MessageID: strconv.Itoa(i)}
	}
	d := dedupe.New(nil)
	var order []int
	for _, err := range d.DoEach(ctx, keys[:16], func(_ context.Context, i int) error { order = append(order, i); return nil }) {
		require.NoError(t, err)
	}
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, order, "in order by default")

	var running, most atomic.Int32
	release := make(chan struct{})
	var once sync.Once
	errs := d.With(dedupe.WithConcurrency(4)).DoEach(ctx, keys[16:], func(context.Context, int) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if n == 4 {
			once.Do(func() { close(release) })
		}
		<-release
		return nil
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	assert.Equal(t, int32(4), most.Load(), "at most 4 at once, and 4 reached")
}

// TestDoEachPanic lets a fn's panic go on once the batch is settled: the
// keys before it are marked, it and those after it released and not run.
func TestDoEachPanic(t *testing.T) {
	for _, conc := range []int{1, 3} {
		t.Run(fmt.Sprintf("concurrency=%d", conc), func(t *testing.T) {
			ctx := context.Background()
			d := dedupe.New(nil, dedupe.WithConcurrency(conc))
			keys := eachKeys("c", "0", "1", "2", "3", "4", "5")
			var ran sync.Map
			func() {
				defer func() { assert.Equal(t, "boom", recover(), "the panic goes on") }()
				d.DoEach(ctx, keys, func(_ context.Context, i int) error {
					ran.Store(i, true)
					if i == 2 {
						panic("boom")
					}
					if conc > 1 && i > 2 {
						time.Sleep(time.Millisecond)
					}
					return nil
				})
				t.Error("DoEach returned")
			}()
			errs := d.DoEach(ctx, keys, func(_ context.Context, i int) error { return nil })
			for i, err := range errs {
				if _, did := ran.Load(i); did && i != 2 {
					assert.ErrorIs(t, err, dedupe.ErrDuplicate, "key %d ran and was marked", i)
				} else {
					assert.NoError(t, err, "key %d released: runs on redelivery", i)
				}
			}
			if conc == 1 {
				_, did := ran.Load(3)
				assert.False(t, did, "no fn starts after a panic")
			}
		})
	}
}

// TestDoEachWait waits for a key another caller holds, and runs it once
// that caller released it (in a synctest bubble: its clock is fake).
func TestDoEachWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(st, dedupe.WithWait(5*time.Second))
		keys := eachKeys("slack", "a", "b")
		c := dedupe.NewClaim(keys[1])
		_, err := st.Claim(ctx, c, time.Minute)
		require.NoError(t, err)
		go func() {
			time.Sleep(20 * time.Millisecond)
			_ = st.Release(context.Background(), c)
		}()
		var ran atomic.Int32
		errs := d.DoEach(ctx, keys, func(context.Context, int) error { ran.Add(1); return nil })
		assert.Equal(t, []error{nil, nil}, errs)
		assert.Equal(t, int32(2), ran.Load())
		assert.Equal(t, uint64(1), d.Stats().WaitsClaimed)
	})
}

// TestDoEachCancelled does not run the fns left when ctx ends mid-batch, and
// releases their keys.
func TestDoEachCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	d := dedupe.New(nil)
	keys := eachKeys("c", "0", "1", "2", "3")
	errs := d.DoEach(ctx, keys, func(_ context.Context, i int) error {
		if i == 1 {
			cancel()
		}
		return nil
	})
	assert.NoError(t, errs[0])
	assert.NoError(t, errs[1], "fn 1 ran and succeeded: marked")
	assert.ErrorIs(t, errs[2], context.Canceled)
	assert.ErrorIs(t, errs[3], context.Canceled)
	errs = d.DoEach(context.Background(), keys, func(context.Context, int) error { return nil })
	assert.Equal(t, []error{dedupe.ErrDuplicate, dedupe.ErrDuplicate, nil, nil}, errs)
}

// TestDoEachLeaseLost cancels the context of a fn whose lease could not be
// renewed, and does not start a fn whose lease ran out before its turn.
func TestDoEachLeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(st, dedupe.WithLease(200*time.Millisecond), dedupe.WithRenewal(-1))
		keys := eachKeys("c", "slow", "late")
		errs := d.DoEach(ctx, keys, func(ctx context.Context, i int) error {
			<-ctx.Done()
			return context.Cause(ctx)
		})
		require.ErrorIs(t, errs[0], dedupe.ErrNotOwner, "the slow fn's context ends with its lease")
		require.ErrorIs(t, errs[1], dedupe.ErrNotOwner, "the late key is not run: its lease ran out first")
		assert.Contains(t, errs[1].Error(), "not run")
	})
}

// TestDoEachLeaseRenewed renews the leases of a batch while its fns run:
// another caller cannot claim a key whose fn has not started yet.
func TestDoEachLeaseRenewed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := dedupe.NewMemoryStore(dedupe.MemoryConfig{})
		d := dedupe.New(st, dedupe.WithLease(300*time.Millisecond), dedupe.WithRenewal(50*time.Millisecond))
		keys := eachKeys("c", "first", "second")
		var stolen []dedupe.Status
		errs := d.DoEach(ctx, keys, func(ctx context.Context, i int) error {
			if i == 0 {
				time.Sleep(600 * time.Millisecond) // two leases
				s, err := st.Claim(ctx, dedupe.NewClaim(keys[1]), time.Minute)
				require.NoError(t, err)
				stolen = append(stolen, s)
			}
			return ctx.Err()
		})
		assert.Equal(t, []error{nil, nil}, errs)
		assert.Equal(t, []dedupe.Status{dedupe.InFlight}, stolen, "the second key stayed held while the first ran")
	})
}

// TestDoEachAmbiguousClaims loses the replies of a batch's claims: DoEach
// asks again with the same tokens, and runs each key once.
func TestDoEachAmbiguousClaims(t *testing.T) {
	ctx := context.Background()
	flaky := &flakyStore{Store: dedupe.NewMemoryStore(dedupe.MemoryConfig{})}
	d := dedupe.New(flaky)
	keys := eachKeys("c", "0", "1", "2", "3")
	flaky.lostNext.Store(2)
	var ran atomic.Int32
	errs := d.DoEach(ctx, keys, func(context.Context, int) error { ran.Add(1); return nil })
	assert.Equal(t, []error{nil, nil, nil, nil}, errs)
	assert.Equal(t, int32(4), ran.Load())
	assert.Equal(t, uint64(2), d.Stats().Ambiguous)

	flaky.down.Store(true)
	errs = d.DoEach(ctx, eachKeys("c", "4", "5"), func(context.Context, int) error { t.Error("ran while down"); return nil })
	for _, err := range errs {
		assert.ErrorIs(t, err, errServerGone)
	}
	flaky.down.Store(false)
	errs = d.DoEach(ctx, eachKeys("c", "4", "5"), func(context.Context, int) error { return nil })
	assert.Equal(t, []error{nil, nil}, errs, "nothing stranded by the failed batch")
}

// TestDoEachEmpty returns empty slices for an empty batch.
func TestDoEachEmpty(t *testing.T) {
	d := dedupe.New(nil)
	errs := d.DoEach(context.Background(), nil, func(context.Context, int) error { return nil })
	assert.Empty(t, errs)
}
