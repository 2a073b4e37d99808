package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// effectsTable creates a table of effects, one row per run of a handler,
// dropped when t ends.
func effectsTable(t *testing.T) string {
	name := testTable(t) // dropped at the end
	conn := adminConn(t)
	_, err := conn.Exec(context.Background(), "CREATE TABLE "+name+" (key text NOT NULL, at timestamptz DEFAULT now())")
	require.NoError(t, err)
	return name
}

func countEffects(t *testing.T, table, key string) int {
	var n int
	require.NoError(t, adminConn(t).QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE key = $1", key).Scan(&n))
	return n
}

// TestTxConformance runs the conformance tests of DoTx on both layouts, the
// stores of each on one table, with one table of effects.
func TestTxConformance(t *testing.T) {
	for _, l := range []struct {
		name string
		cfg  Config
	}{
		{"plain", Config{}},
		{"partitioned", Config{Partitioned: true, PartitionSpan: time.Hour}},
	} {
		t.Run(l.name, func(t *testing.T) {
			pool := newPool(t, "", 0)
			cfg := l.cfg
			cfg.Table = testTable(t)
			effects := effectsTable(t)
			dedupetest.RunTx(t, dedupetest.TxConfig[pgx.Tx]{
				New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
					cfg := cfg
					cfg.TTL, cfg.Lease = o.TTL, o.Lease
					s, err := New(context.Background(), pool, cfg)
					require.NoError(t, err, "New")
					return s
				},
				Effect: func(ctx context.Context, tx pgx.Tx, k dedupe.Key) error {
					_, err := tx.Exec(ctx, "INSERT INTO "+effects+" (key) VALUES ($1)", k.String())
					return err
				},
				Effects: func(t *testing.T, _ dedupe.Store, k dedupe.Key) int {
					return countEffects(t, effects, k.String())
				},
			})
			if l.cfg.Partitioned {
				checkOneRowPerKey(t, cfg.Table)
			}
		})
	}
}

// A claim of Do holds a key against DoTx, and an open DoTx holds it against
// Do's claim until it commits.
func TestDoTxBesideDo(t *testing.T) {
	s := newTestStore(t, newPool(t, "", 0), Config{})
	ctx := context.Background()
	k := dedupe.Key{Channel: "tx", MessageID: "claimed"}
	c := dedupe.NewClaim(k)
	st, err := s.Claim(ctx, c, time.Minute)
	require.NoError(t, err, "Claim")
	require.Equal(t, dedupe.Claimed, st, "Claim")
	require.ErrorIs(t, s.DoTx(ctx, k, func(context.Context, pgx.Tx) error { return nil }), dedupe.ErrInFlight, "DoTx beside a claim")
	require.NoError(t, s.Release(ctx, c))
	require.NoError(t, s.DoTx(ctx, k, func(context.Context, pgx.Tx) error { return nil }), "DoTx after the release")

	k2 := dedupe.Key{Channel: "tx", MessageID: "open"}
	inTx, commit := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.DoTx(ctx, k2, func(context.Context, pgx.Tx) error { close(inTx); <-commit; return nil })
	}()
	<-inTx
	claimed := make(chan dedupe.Status, 1)
	go func() {
		st, err := s.Claim(ctx, dedupe.NewClaim(k2), time.Minute)
		assert.NoError(t, err)
		claimed <- st
	}()
	select {
	case st := <-claimed:
		require.Failf(t, "Claim answered early", "Claim beside an open DoTx answered %v before it committed", st)
	case <-time.After(100 * time.Millisecond):
	}
	close(commit)
	require.NoError(t, <-done)
	require.Equal(t, dedupe.Duplicate, <-claimed, "Claim after DoTx committed")
}

// Of concurrent DoTx calls of one key, one runs fn.
func TestDoTxConcurrent(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			s := newTestStore(t, newPool(t, "", 16), l.cfg)
			effects := effectsTable(t)
			const keys, copies = 20, 8
			var runs atomic.Int64
			var wg sync.WaitGroup
			for i := range keys {
				k := dedupe.Key{Channel: "tx", MessageID: "c" + string(rune('a'+i))}
				for range copies {
					wg.Go(func() {
						err := s.DoTx(context.Background(), k, func(ctx context.Context, tx pgx.Tx) error {
							runs.Add(1)
							_, err := tx.Exec(ctx, "INSERT INTO "+effects+" (key) VALUES ($1)", k.String())
							time.Sleep(time.Millisecond)
							return err
						})
						if !errors.Is(err, dedupe.ErrDuplicate) {
							assert.NoError(t, err, "DoTx")
						}
					})
				}
			}
			wg.Wait()
			require.Equal(t, int64(keys), runs.Load(), "runs of %d keys with %d copies each, want one per key", keys, copies)
		})
	}
}

// DoResultTx keeps fn's result with the mark in fn's transaction: a copy,
// through DoResultTx or a Deduper's DoResult, gets it with ErrDuplicate; a
// failed run keeps neither.
func TestDoResultTx(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			s := newTestStore(t, newPool(t, "", 2), l.cfg)
			effects := effectsTable(t)
			ctx := context.Background()
			k := testKey(t, "tx")
			errFail := errors.New("handler failed")
			_, err := s.DoResultTx(ctx, k, func(context.Context, pgx.Tx) ([]byte, error) {
				return []byte("lost"), errFail
			})
			require.ErrorIs(t, err, errFail, "DoResultTx with a failing fn")
			_, ok, err := s.Result(ctx, k)
			require.NoError(t, err, "Result after a failed run")
			require.False(t, ok, "Result after a failed run: want not marked")
			res, err := s.DoResultTx(ctx, k, func(ctx context.Context, tx pgx.Tx) ([]byte, error) {
				_, err := tx.Exec(ctx, "INSERT INTO "+effects+" (key) VALUES ($1)", k.String())
				return []byte("reply"), err
			})
			require.NoError(t, err, "DoResultTx")
			require.Equal(t, "reply", string(res), "DoResultTx")
			res, err = s.DoResultTx(ctx, k, func(context.Context, pgx.Tx) ([]byte, error) {
				require.Fail(t, "fn ran for a copy")
				return nil, nil
			})
			require.ErrorIs(t, err, dedupe.ErrDuplicate, "DoResultTx of a copy: want the result and ErrDuplicate")
			require.Equal(t, "reply", string(res), "DoResultTx of a copy: want the result and ErrDuplicate")
			res, err = dedupe.New(s).DoResult(ctx, k, func(context.Context) ([]byte, error) { return nil, nil })
			require.ErrorIs(t, err, dedupe.ErrDuplicate, "DoResult of a copy: want the result and ErrDuplicate")
			require.Equal(t, "reply", string(res), "DoResult of a copy: want the result and ErrDuplicate")
			require.Equal(t, 1, countEffects(t, effects, k.String()), "effects")
		})
	}
}
