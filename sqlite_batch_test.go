package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// TestSQLiteBatchIsolation makes one Mark among many concurrent ones fail in
// SQL (a trigger refuses its key) and checks that only it fails, and that its
// partial work (dropping the key's claim) is undone.
func TestSQLiteBatchIsolation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	s := openSQLite(t, path, dedupe.SQLiteConfig{})
	ctx := context.Background()
	bad := dedupe.Key{Channel: "iso", MessageID: "bad"}
	c, cSt, err := claimNew(ctx, s, bad, 0)
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, cSt)
	_, err = rawDB(t, path).Exec(`CREATE TRIGGER refuse_bad BEFORE INSERT ON gateway_dedupe WHEN NEW.dedupe_key = 'iso:bad'
BEGIN SELECT RAISE(ABORT, 'refused by trigger'); END`)
	require.NoError(t, err)

	for round := range 5 {
		unlock := lockDB(t, path, "IMMEDIATE") // let the calls queue up into one batch
		var wg, started sync.WaitGroup
		errs := make([]error, 64)
		keys := make([]dedupe.Key, 64)
		for i := range keys {
			keys[i] = dedupe.Key{Channel: "iso", MessageID: fmt.Sprintf("%d-%d", round, i)}
			if i == 31 {
				keys[i] = bad
			}
			wg.Add(1)
			started.Add(1)
			go func() {
				defer wg.Done()
				started.Done()
				errs[i] = s.Mark(ctx, keys[i], 0)
			}()
		}
		// The calls queue up behind the lock, most of them for one
		// transaction; the outcome must not depend on how they are batched.
		started.Wait()
		unlock()
		wg.Wait()
		for i, err := range errs {
			if keys[i] == bad {
				assert.ErrorContains(t, err, "refused by trigger")
				assert.True(t, strings.HasPrefix(err.Error(), "dedupe: "), err.Error())
				continue
			}
			require.NoError(t, err, keys[i].String())
			ok, err := s.Exists(ctx, keys[i])
			require.NoError(t, err)
			assert.True(t, ok, keys[i].String())
		}
	}
	ok, err := s.Exists(ctx, bad)
	require.NoError(t, err)
	assert.False(t, ok)
	_, gotSt, err := claimNew(ctx, s, bad, 0)
	require.NoError(t, err)
	assert.Equal(t, dedupe.InFlight, gotSt, "the failed Mark left the claim in place")
	require.NoError(t, s.Extend(ctx, c, 0), "and its owner still holds it")
}

func TestSQLiteCancelWhileLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	s := openSQLite(t, path, dedupe.SQLiteConfig{BusyTimeout: time.Minute})
	unlock := lockDB(t, path, "IMMEDIATE")
	k := dedupe.Key{Channel: "cancel", MessageID: "1"}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Mark(ctx, k, 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	_, _, err = claimNew(ctx, s, k, 0)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 10*time.Second, "cancelled calls return without waiting out the busy timeout")
	unlock()
	ok, err := s.Exists(context.Background(), k)
	require.NoError(t, err)
	assert.False(t, ok, "a cancelled Mark wrote nothing")
	_, cSt, err := claimNew(context.Background(), s, k, 0)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Claimed, cSt, "a cancelled Claim took nothing")
}

// TestSQLiteCloseRace closes the store under concurrent writes: each write
// either succeeds, and is there after a reopen, or fails with ErrClosed.
func TestSQLiteCloseRace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d.db")
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.NoError(t, err)
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var done []dedupe.Key
	enough := make(chan struct{})
	signal := sync.OnceFunc(func() { close(enough) })
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				k := dedupe.Key{Channel: "close", MessageID: fmt.Sprintf("%d-%d", g, i)}
				err := s.Mark(ctx, k, 0)
				if errors.Is(err, dedupe.ErrClosed) {
					return
				}
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				done = append(done, k)
				if len(done) == 200 {
					signal()
				}
				mu.Unlock()
			}
		}()
	}
	<-enough
	require.NoError(t, s.Close())
	wg.Wait()
	s = openSQLite(t, path, dedupe.SQLiteConfig{})
	for _, k := range done {
		ok, err := s.Exists(ctx, k)
		require.NoError(t, err)
		require.True(t, ok, "%s was marked before Close", k)
	}
}
