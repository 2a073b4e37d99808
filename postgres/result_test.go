package postgres

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

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
				require.NoError(t, err, "Result(%s)", k)
				require.Equal(t, marked, ok, "Result(%s): marked", k)
				require.Equal(t, res, got, "Result(%s)", k)
			}
			k := testKey(t, "result")
			want(k, nil, false)
			c1, _, err := claimNew(ctx, s, k, time.Minute)
			require.NoError(t, err)
			want(k, nil, false) // a claim is not a mark
			require.NoError(t, s.MarkResult(ctx, k, []byte("answer"), time.Hour))
			want(k, []byte("answer"), true)
			require.ErrorIs(t, s.Release(ctx, c1), dedupe.ErrNotOwner, "Release after the mark")
			want(k, []byte("answer"), true) // a release leaves a mark alone
			require.NoError(t, s.Mark(ctx, k, time.Hour))
			want(k, nil, true) // a later Mark drops the result

			empty := testKey(t, "result")
			require.NoError(t, s.MarkResult(ctx, empty, []byte{}, time.Hour))
			want(empty, nil, true)

			big := testKey(t, "result")
			err = s.MarkResult(ctx, big, make([]byte, dedupe.MaxResultSize+1), time.Hour)
			require.ErrorIs(t, err, dedupe.ErrTooLarge, "MarkResult over MaxResultSize")
			want(big, nil, false)
			full := bytes.Repeat([]byte{0, 0xff}, dedupe.MaxResultSize/2)
			require.NoError(t, s.MarkResult(ctx, big, full, time.Hour))
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
		require.NoError(t, s.MarkResult(ctx, k, []byte("old"), time.Minute))
	}
	c.advance(t, 2*time.Minute)
	want(byClaim, nil, false)
	c2, st, err := claimNew(ctx, s, byClaim, time.Minute)
	require.NoError(t, err, "Claim over an expired mark")
	require.Equal(t, dedupe.Claimed, st, "Claim over an expired mark")
	require.ErrorIs(t, s.Release(ctx, dedupe.NewClaim(byRelease)), dedupe.ErrNotOwner, "Release of an expired mark")
	for _, k := range []dedupe.Key{byClaim, byRelease} { // a claim's row, a fence's row
		var kept []byte
		require.NoError(t, s.pool.QueryRow(ctx, `SELECT result FROM `+s.table+` WHERE key = $1`, k.String()).Scan(&kept), "the row of %s", k)
		require.Nil(t, kept, "the row of %s keeps result %q", k, kept)
	}
	require.NoError(t, s.Release(ctx, c2))
	require.NoError(t, s.DoTx(ctx, byTx, func(context.Context, pgx.Tx) error { return nil }))
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
			res, err := d.DoResult(ctx, k, fn)
			require.NoError(t, err, "first DoResult")
			require.Equal(t, "reply 1", string(res), "first DoResult")
			res, err = d.DoResult(ctx, k, fn)
			require.ErrorIs(t, err, dedupe.ErrDuplicate, "second DoResult: want the first's result and ErrDuplicate")
			require.Equal(t, "reply 1", string(res), "second DoResult: want the first's result and ErrDuplicate")
			require.Equal(t, 1, runs, "times fn ran")
		})
	}
}
