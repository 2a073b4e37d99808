package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// TestMultiInstance runs four stores, each on its own pool as separate
// gateway processes would be, with 64 goroutines each racing on the same keys:
// exactly one claim per key across all of them, and every key marked once.
//
// On the partitioned layout the instances also race on creating the table,
// its function and its partitions.
func TestMultiInstance(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) { raceInstances(t, l.cfg) })
	}
}

// raceInstances is TestMultiInstance on the layout of cfg.
func raceInstances(t *testing.T, cfg Config) {
	const instances, racers, keys = 4, 64, 32
	table := testTable(t)
	ctx := context.Background()

	rec := newRecorder()
	stores := startInstances(t, instances, table, cfg, rec)

	id := randomHex(t, 4)
	ks := make([]dedupe.Key, keys)
	for i := range ks {
		ks[i] = dedupe.Key{Channel: "multi", MessageID: fmt.Sprintf("%s-%d", id, i)}
	}
	var claimed, marked, inFlight, duplicate [keys]atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for inst, s := range stores {
		for g := range racers {
			wg.Go(func() {
				<-start
				for i := range keys {
					i := (i + g + inst*racers) % keys // racers take the keys in different orders
					_, cSt, err := claimNew(ctx, s, ks[i], time.Minute)
					if !assert.NoError(t, err, "instance %d: Claim(%s)", inst, ks[i]) {
						return
					}
					switch cSt {
					case dedupe.Claimed:
						claimed[i].Add(1)
						if !assert.NoError(t, s.Mark(ctx, ks[i], time.Hour), "instance %d: Mark(%s)", inst, ks[i]) {
							return
						}
						marked[i].Add(1)
					case dedupe.InFlight:
						inFlight[i].Add(1)
					case dedupe.Duplicate:
						duplicate[i].Add(1)
					}
				}
			})
		}
	}
	close(start)
	wg.Wait()
	var dups, held int64
	for i, k := range ks {
		assert.Equal(t, int64(1), claimed[i].Load(), "times %s was claimed by %d racers on %d instances: want exactly once", k, racers, instances)
		assert.Equal(t, int64(1), marked[i].Load(), "times %s was marked: want once", k)
		dups += duplicate[i].Load()
		held += inFlight[i].Load()
	}
	t.Logf("%d claims: %d duplicate, %d in flight; %d claim statements run again",
		instances*racers*keys, dups, held, rec.count(msgClaimAgain))
	checkProcessedEverywhere(t, stores, ks)
	checkOneRowPerKey(t, table)
}

// checkProcessedEverywhere checks that every instance sees every key as
// processed.
func checkProcessedEverywhere(t *testing.T, stores []*Store, ks []dedupe.Key) {
	t.Helper()
	ctx := context.Background()
	for inst, s := range stores {
		for _, k := range ks {
			ok, err := s.Exists(ctx, k)
			require.NoError(t, err, "instance %d: Exists(%s)", inst, k)
			require.True(t, ok, "instance %d: Exists(%s)", inst, k)
			_, cSt, err := claimNew(ctx, s, k, time.Minute)
			require.NoError(t, err, "instance %d: Claim(%s) after the run", inst, k)
			require.Equal(t, dedupe.Duplicate, cSt, "instance %d: Claim(%s) after the run", inst, k)
		}
	}
}

// startInstances starts n stores configured by cfg, each on a pool of its
// own, together, on table, and closes them when t ends.
func startInstances(t *testing.T, n int, table string, cfg Config, rec *recorder) []*Store {
	t.Helper()
	ctx := context.Background()
	stores := make([]*Store, n)
	var startWG sync.WaitGroup
	for i := range stores {
		pool := newPool(t, "", 4)
		startWG.Go(func() {
			cfg := cfg
			cfg.Table, cfg.Logger = table, rec.logger()
			s, err := New(ctx, pool, cfg)
			if !assert.NoError(t, err, "New of instance %d", i) {
				return
			}
			stores[i] = s
		})
	}
	startWG.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for _, s := range stores {
		t.Cleanup(func() { _ = s.Close() })
	}
	return stores
}

// TestRepeatableRead races claims and releases of one key over connections
// whose default isolation is REPEATABLE READ, which the package documentation
// says may fail a racing Claim with a serialization error but never give a
// wrong outcome: at no moment do two callers hold the key.
func TestRepeatableRead(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	require.NoError(t, err)
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "repeatable read"
	cfg.MaxConns = 8
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := newTestStore(t, pool, Config{})
	k := dedupe.Key{Channel: "rr", MessageID: randomHex(t, 4)}
	var holders, claims, serialization atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				c, cSt, err := claimNew(ctx, s, k, time.Minute)
				var pgErr *pgconn.PgError
				switch {
				case errors.As(err, &pgErr) && pgErr.Code == "40001":
					serialization.Add(1)
					continue
				case !assert.NoError(t, err, "Claim"):
					return
				case cSt == dedupe.InFlight:
					continue
				case !assert.Equal(t, dedupe.Claimed, cSt, "Claim"):
					return
				}
				if !holdExclusively(t, s, c, &holders, &claims) {
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d claims, %d serialization failures", claims.Load(), serialization.Load())
	require.NotZero(t, claims.Load(), "no claim succeeded")
}
