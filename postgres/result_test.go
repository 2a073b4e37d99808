package postgres

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatewaykit/dedupe"
)

// layouts are the two layouts of a table, for the tests that run on both.
var layouts = []struct {
	name string
	cfg  Config
}{
	{"plain", Config{}},
	{"partitioned", Config{Partitioned: true}},
}

// TestResults checks MarkResult and Result on both layouts against the
// contract of dedupe.ResultStore: a result is kept with its mark and read
// back; an empty one is none; a later Mark, a claim over the expired mark
// and a MarkTx over it drop it; a claim is not a mark; a result over
// MaxResultSize is refused with nothing written.
func TestResults(t *testing.T) {
	c := newServerClock(t)
	pool := c.pool(t, 4)
	ctx := context.Background()
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			cfg := l.cfg
			cfg.Table = c.table(t)
			s := newTestStore(t, pool, cfg)
			want := func(k dedupe.Key, res []byte, marked bool) {
				t.Helper()
				got, ok, err := s.Result(ctx, k)
				if err != nil || ok != marked || !bytes.Equal(got, res) || (res == nil) != (got == nil) {
					t.Fatalf("Result(%s) = %q, %v, %v; want %q, %v", k, got, ok, err, res, marked)
				}
			}
			k := testKey(t, "result")
			want(k, nil, false)
			c1, _, err := claimNew(ctx, s, k, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			want(k, nil, false) // a claim is not a mark
			if err := s.MarkResult(ctx, k, []byte("answer"), time.Hour); err != nil {
				t.Fatal(err)
			}
			want(k, []byte("answer"), true)
			if err := s.Release(ctx, c1); !errors.Is(err, dedupe.ErrNotOwner) {
				t.Fatalf("Release after the mark = %v, want ErrNotOwner", err)
			}
			want(k, []byte("answer"), true) // a release leaves a mark alone
			if err := s.Mark(ctx, k, time.Hour); err != nil {
				t.Fatal(err)
			}
			want(k, nil, true) // a later Mark drops the result

			empty := testKey(t, "result")
			if err := s.MarkResult(ctx, empty, []byte{}, time.Hour); err != nil {
				t.Fatal(err)
			}
			want(empty, nil, true)

			big := testKey(t, "result")
			err = s.MarkResult(ctx, big, make([]byte, dedupe.MaxResultSize+1), time.Hour)
			if !errors.Is(err, dedupe.ErrTooLarge) {
				t.Fatalf("MarkResult over MaxResultSize = %v, want ErrTooLarge", err)
			}
			want(big, nil, false)
			full := bytes.Repeat([]byte{0, 0xff}, dedupe.MaxResultSize/2)
			if err := s.MarkResult(ctx, big, full, time.Hour); err != nil {
				t.Fatal(err)
			}
			want(big, full, true)
			checkResultsDropped(t, c, s, want)
		})
	}
}

// checkResultsDropped checks that a claim, a release and a MarkTx over an
// expired mark drop its result.
func checkResultsDropped(t *testing.T, c *serverClock, s *Store, want func(dedupe.Key, []byte, bool)) {
	t.Helper()
	ctx := context.Background()
	byClaim, byRelease, byTx := testKey(t, "result"), testKey(t, "result"), testKey(t, "result")
	for _, k := range []dedupe.Key{byClaim, byRelease, byTx} {
		if err := s.MarkResult(ctx, k, []byte("old"), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	c.advance(t, 2*time.Minute)
	want(byClaim, nil, false)
	c2, st, err := claimNew(ctx, s, byClaim, time.Minute)
	if err != nil || st != dedupe.Claimed {
		t.Fatalf("Claim over an expired mark = %v, %v", st, err)
	}
	if err := s.Release(ctx, dedupe.NewClaim(byRelease)); !errors.Is(err, dedupe.ErrNotOwner) {
		t.Fatalf("Release of an expired mark = %v, want ErrNotOwner", err)
	}
	for _, k := range []dedupe.Key{byClaim, byRelease} { // a claim's row, a fence's row
		var kept []byte
		if err := s.pool.QueryRow(ctx, `SELECT result FROM `+s.table+` WHERE key = $1`, k.String()).Scan(&kept); err != nil || kept != nil {
			t.Fatalf("the row of %s keeps result %q (%v)", k, kept, err)
		}
	}
	if err := s.Release(ctx, c2); err != nil {
		t.Fatal(err)
	}
	if err := s.DoTx(ctx, byTx, func(context.Context, pgx.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	want(byTx, nil, true)
}

// TestDoResult runs Deduper.DoResult on the store: fn runs once, and a
// later copy gets its result with ErrDuplicate.
func TestDoResult(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			s := newTestStore(t, newPool(t, "", 2), l.cfg)
			d := dedupe.New(s)
			ctx := context.Background()
			k := testKey(t, "doresult")
			runs := 0
			fn := func(context.Context) ([]byte, error) {
				runs++
				return []byte("reply 1"), nil
			}
			if res, err := d.DoResult(ctx, k, fn); err != nil || string(res) != "reply 1" {
				t.Fatalf("first DoResult = %q, %v", res, err)
			}
			res, err := d.DoResult(ctx, k, fn)
			if !errors.Is(err, dedupe.ErrDuplicate) || string(res) != "reply 1" {
				t.Fatalf("second DoResult = %q, %v; want the first's result and ErrDuplicate", res, err)
			}
			if runs != 1 {
				t.Fatalf("fn ran %d times", runs)
			}
		})
	}
}
