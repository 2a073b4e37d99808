package postgres

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// effectsTable creates a table of effects, one row per run of a handler,
// dropped when t ends.
func effectsTable(t *testing.T) string {
	name := testTable(t) // dropped at the end
	conn := adminConn(t)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE "+name+" (key text NOT NULL, at timestamptz DEFAULT now())"); err != nil {
		t.Fatal(err)
	}
	return name
}

func countEffects(t *testing.T, table, key string) int {
	var n int
	if err := adminConn(t).QueryRow(context.Background(), "SELECT count(*) FROM "+table+" WHERE key = $1", key).Scan(&n); err != nil {
		t.Fatal(err)
	}
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
					if err != nil {
						t.Fatalf("New: %v", err)
					}
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

// DoTx commits fn's effects with the mark, rolls both back on failure, and
// answers copies as Do does.
func TestDoTx(t *testing.T) {
	s := newTestStore(t, newPool(t, "", 0), Config{})
	effects := effectsTable(t)
	ctx := context.Background()
	k := dedupe.Key{Channel: "tx", MessageID: "1"}
	write := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO "+effects+" (key) VALUES ($1)", k.String())
		return err
	}

	errFail := errors.New("handler failed")
	err := s.DoTx(ctx, k, func(ctx context.Context, tx pgx.Tx) error {
		if err := write(ctx, tx); err != nil {
			return err
		}
		return errFail
	})
	if !errors.Is(err, errFail) {
		t.Fatalf("DoTx with a failing fn = %v, want its error", err)
	}
	if n := countEffects(t, effects, k.String()); n != 0 {
		t.Fatalf("a failed run left %d effects", n)
	}
	if ok, _ := s.Exists(ctx, k); ok {
		t.Fatal("a failed run left the key marked")
	}

	if err := s.DoTx(ctx, k, write); err != nil {
		t.Fatalf("DoTx: %v", err)
	}
	if err := s.DoTx(ctx, k, write); !errors.Is(err, dedupe.ErrDuplicate) {
		t.Fatalf("second DoTx = %v, want ErrDuplicate", err)
	}
	if ok, _ := s.Exists(ctx, k); !ok {
		t.Fatal("the key is not marked after DoTx")
	}
	if st, _ := s.Claim(ctx, dedupe.NewClaim(k), 0); st != dedupe.Duplicate {
		t.Fatalf("Claim after DoTx = %v, want duplicate", st)
	}
	if n := countEffects(t, effects, k.String()); n != 1 {
		t.Fatalf("%d effects, want 1", n)
	}
}

// A claim of Do holds a key against DoTx, and an open DoTx holds it against
// Do's claim until it commits.
func TestDoTxBesideDo(t *testing.T) {
	s := newTestStore(t, newPool(t, "", 0), Config{})
	ctx := context.Background()
	k := dedupe.Key{Channel: "tx", MessageID: "claimed"}
	c := dedupe.NewClaim(k)
	if st, err := s.Claim(ctx, c, time.Minute); err != nil || st != dedupe.Claimed {
		t.Fatalf("Claim = %v, %v", st, err)
	}
	if err := s.DoTx(ctx, k, func(context.Context, pgx.Tx) error { return nil }); !errors.Is(err, dedupe.ErrInFlight) {
		t.Fatalf("DoTx beside a claim = %v, want ErrInFlight", err)
	}
	if err := s.Release(ctx, c); err != nil {
		t.Fatal(err)
	}
	if err := s.DoTx(ctx, k, func(context.Context, pgx.Tx) error { return nil }); err != nil {
		t.Fatalf("DoTx after the release: %v", err)
	}

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
		if err != nil {
			t.Error(err)
		}
		claimed <- st
	}()
	select {
	case st := <-claimed:
		t.Fatalf("Claim beside an open DoTx answered %v before it committed", st)
	case <-time.After(100 * time.Millisecond):
	}
	close(commit)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if st := <-claimed; st != dedupe.Duplicate {
		t.Fatalf("Claim after DoTx committed = %v, want duplicate", st)
	}
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
						if err != nil && !errors.Is(err, dedupe.ErrDuplicate) {
							t.Errorf("DoTx: %v", err)
						}
					})
				}
			}
			wg.Wait()
			if runs.Load() != keys {
				t.Fatalf("%d runs of %d keys with %d copies each, want one per key", runs.Load(), keys, copies)
			}
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
			if _, err := s.DoResultTx(ctx, k, func(context.Context, pgx.Tx) ([]byte, error) {
				return []byte("lost"), errFail
			}); !errors.Is(err, errFail) {
				t.Fatalf("DoResultTx with a failing fn = %v", err)
			}
			if _, ok, err := s.Result(ctx, k); err != nil || ok {
				t.Fatalf("Result after a failed run = %v, %v; want not marked", ok, err)
			}
			res, err := s.DoResultTx(ctx, k, func(ctx context.Context, tx pgx.Tx) ([]byte, error) {
				_, err := tx.Exec(ctx, "INSERT INTO "+effects+" (key) VALUES ($1)", k.String())
				return []byte("reply"), err
			})
			if err != nil || string(res) != "reply" {
				t.Fatalf("DoResultTx = %q, %v", res, err)
			}
			res, err = s.DoResultTx(ctx, k, func(context.Context, pgx.Tx) ([]byte, error) {
				t.Fatal("fn ran for a copy")
				return nil, nil
			})
			if !errors.Is(err, dedupe.ErrDuplicate) || string(res) != "reply" {
				t.Fatalf("DoResultTx of a copy = %q, %v; want the result and ErrDuplicate", res, err)
			}
			res, err = dedupe.New(s).DoResult(ctx, k, func(context.Context) ([]byte, error) { return nil, nil })
			if !errors.Is(err, dedupe.ErrDuplicate) || string(res) != "reply" {
				t.Fatalf("DoResult of a copy = %q, %v; want the result and ErrDuplicate", res, err)
			}
			if n := countEffects(t, effects, k.String()); n != 1 {
				t.Fatalf("%d effects, want 1", n)
			}
		})
	}
}
