package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// benchCallers are the numbers of concurrent callers the benchmarks compare:
// a quiet gateway, a busy one, and one with as many webhook handlers as a
// busy gateway's pool.
var benchCallers = []int{1, 8, 64}

// benchPoolSize bounds the pool shared by the contenders: enough connections
// for the per-call contenders' callers to commit in parallel, within the
// server's max_connections beside other tests.
const benchPoolSize = 32

// benchKeys hands out keys never used before in this process.
type benchKeys struct {
	prefix string
	n      atomic.Int64
}

func (k *benchKeys) next() dedupe.Key {
	return dedupe.Key{Channel: "bench", MessageID: k.prefix + strconv.FormatInt(k.n.Add(1), 10)}
}

// latencies collects the durations of one kind of call from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d...)
	l.mu.Unlock()
}

// p99 returns the 99th percentile.
func (l *latencies) p99() time.Duration {
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	return l.d[len(l.d)*99/100]
}

// callers runs op b.N times from n goroutines and reports the throughput in
// keys/s and the 99th percentile of the durations op records in claim-p99-µs.
func callers(b *testing.B, n int, op func(ctx context.Context, lat *[]time.Duration) error) {
	b.Helper()
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	var lat latencies
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	for range n {
		wg.Go(func() {
			mine := make([]time.Duration, 0, b.N/n+1)
			defer func() { lat.add(mine) }()
			for next.Add(1) <= int64(b.N) {
				if !assert.NoError(b, op(ctx, &mine)) {
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "keys/s")
	b.ReportMetric(float64(lat.p99().Microseconds()), "claim-p99-µs")
}

// warmUp runs op 256 times from 8 goroutines, untimed, so that no contender
// pays for a cold start (dialling, preparing statements, growing the heap)
// because it runs first.
func warmUp(b *testing.B, op func(ctx context.Context, lat *[]time.Duration) error) {
	b.Helper()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			var lat []time.Duration
			for range 32 {
				if !assert.NoError(b, op(context.Background(), &lat)) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// timed runs f and records its duration in lat.
func timed(lat *[]time.Duration, f func() error) error {
	start := time.Now()
	err := f()
	*lat = append(*lat, time.Since(start))
	return err
}

const benchToken = "0123456789abcdef0123456789abcdef"

// BenchmarkClaimMark measures Claim then Mark of new keys, the work of
// Deduper.Do around a successful dispatch, for 1, 8 and 64 concurrent
// callers, beside the same pool running the store's own statements one round
// trip and one transaction per call (impl=raw: the store as it was before it
// batched), the minimal statements for it (impl=insert: INSERT … ON CONFLICT
// DO NOTHING, then UPDATE), and the store's statements gathered by hand with
// 64 keys in flight: 2 goroutines sending pgx batches of 32 keys, one
// transaction each (impl=ceiling, the same at every caller count). claim-p99-µs is the 99th percentile of the Claim's
// duration, the dedupe lookup a webhook waits for.
func BenchmarkClaimMark(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	w := &claimMark{pool: pool, s: newTestStore(b, pool, Config{}), keys: &benchKeys{prefix: randomHex(b, 4) + "-"}}
	contenders := []contender{{"store", w.store}, {"raw", w.raw}, {"insert", w.insert}}
	for _, ct := range contenders {
		warmUp(b, ct.op)
	}
	for _, c := range benchCallers {
		for _, ct := range contenders {
			b.Run(fmt.Sprintf("callers=%d/impl=%s", c, ct.name), func(b *testing.B) {
				callers(b, c, ct.op)
			})
		}
	}
	b.Run("impl=ceiling", w.ceiling)
}

// claimMark is the work of BenchmarkClaimMark, done by each contender on keys
// never used before.
type claimMark struct {
	pool *pgxpool.Pool
	s    *Store
	keys *benchKeys
}

var benchLease, benchTTL = micros(time.Minute), micros(time.Hour)

func (w *claimMark) store(ctx context.Context, lat *[]time.Duration) error {
	k := w.keys.next()
	var status dedupe.Status
	err := timed(lat, func() (err error) {
		status, err = w.s.Claim(ctx, dedupe.NewClaim(k), time.Minute)
		return err
	})
	if err != nil || status != dedupe.Claimed {
		return fmt.Errorf("Claim(%s) = %v, %v", k, status, err)
	}
	return w.s.Mark(ctx, k, time.Hour)
}

func (w *claimMark) raw(ctx context.Context, lat *[]time.Duration) error {
	k := w.keys.next().String()
	var outcome int
	err := timed(lat, func() error {
		return w.pool.QueryRow(ctx, w.s.sql.claim, k, benchToken, benchLease).Scan(&outcome)
	})
	if err != nil || outcome != claimInserted {
		return fmt.Errorf("claim statement on %s = %v, %v", k, outcome, err)
	}
	_, err = w.pool.Exec(ctx, w.s.sql.mark, k, benchTTL, nil)
	return err
}

func (w *claimMark) insert(ctx context.Context, lat *[]time.Duration) error {
	k := w.keys.next().String()
	var tag pgconn.CommandTag
	err := timed(lat, func() (err error) {
		tag, err = w.pool.Exec(ctx, `INSERT INTO `+w.s.table+` (key, token, expires_at)
VALUES ($1, $2, now() + $3::bigint * interval '1 microsecond') ON CONFLICT DO NOTHING`, k, benchToken, benchLease)
		return err
	})
	if err != nil || tag.RowsAffected() != 1 {
		return fmt.Errorf("insert of %s: %v", k, err)
	}
	_, err = w.pool.Exec(ctx, `UPDATE `+w.s.table+` SET token = NULL,
expires_at = now() + $2::bigint * interval '1 microsecond' WHERE key = $1`, k, benchTTL)
	return err
}

// Ceiling shape: 64 keys in flight, as 2 goroutines each sending 32 keys per
// round trip (issue 22, item 7).
const (
	ceilingSenders = 2
	ceilingKeys    = 32
)

// ceiling claims and marks keys as the store sends them, gathered by hand:
// ceilingSenders goroutines, each sending a batch of ceilingKeys claims, one
// round trip and one transaction, then one of their marks.
func (w *claimMark) ceiling(b *testing.B) {
	b.ReportAllocs()
	var next atomic.Int64
	var wg sync.WaitGroup
	ctx := context.Background()
	start := time.Now()
	for range ceilingSenders {
		wg.Go(func() {
			for {
				end := next.Add(ceilingKeys)
				if !assert.NoError(b, w.round(ctx, min(ceilingKeys, int64(b.N)-(end-ceilingKeys)))) {
					return
				}
				if end >= int64(b.N) {
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "keys/s")
}

// round claims n new keys in one batch, then marks them in another.
func (w *claimMark) round(ctx context.Context, n int64) error {
	if n <= 0 {
		return nil
	}
	var claims, marks pgx.Batch
	for range n {
		k := w.keys.next().String()
		claims.Queue(w.s.sql.claim, k, benchToken, benchLease)
		marks.Queue(w.s.sql.mark, k, benchTTL, nil)
	}
	if err := w.pool.SendBatch(ctx, &claims).Close(); err != nil {
		return err
	}
	return w.pool.SendBatch(ctx, &marks).Close()
}

// contender is one way of doing a benchmark's work.
type contender struct {
	name string
	op   func(ctx context.Context, lat *[]time.Duration) error
}

// compare64 warms every contender up and then runs each with 64 callers.
func compare64(b *testing.B, cs []contender) {
	for _, c := range cs {
		warmUp(b, c.op)
	}
	for _, c := range cs {
		b.Run("impl="+c.name, func(b *testing.B) { callers(b, 64, c.op) })
	}
}

// BenchmarkExists measures Exists of a marked key by 64 callers, beside the
// store's statement run per call on the same pool, with the p99 of each call.
func BenchmarkExists(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	s := newTestStore(b, pool, Config{})
	const marked = 64
	keys := make([]dedupe.Key, marked)
	kb := &benchKeys{prefix: randomHex(b, 4) + "-"}
	ctx := context.Background()
	for i := range keys {
		keys[i] = kb.next()
		require.NoError(b, s.Mark(ctx, keys[i], time.Hour))
	}
	var n atomic.Int64
	compare64(b, []contender{
		{"store", func(ctx context.Context, lat *[]time.Duration) error {
			k := keys[n.Add(1)%marked]
			var ok bool
			err := timed(lat, func() (err error) {
				ok, err = s.Exists(ctx, k)
				return err
			})
			if err != nil || !ok {
				return fmt.Errorf("Exists(%s) = %v, %v", k, ok, err)
			}
			return nil
		}},
		{"raw", func(ctx context.Context, lat *[]time.Duration) error {
			k := keys[n.Add(1)%marked].String()
			var ok bool
			err := timed(lat, func() error { return pool.QueryRow(ctx, s.sql.exists, k).Scan(&ok) })
			if err != nil || !ok {
				return fmt.Errorf("exists statement on %s = %v, %v", k, ok, err)
			}
			return nil
		}},
	})
}

// BenchmarkClaimDuplicate measures 64 callers claiming keys that are already
// marked, the path of a redelivered message, beside the store's statement
// run per call on the same pool. Neither writes anything.
func BenchmarkClaimDuplicate(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	s := newTestStore(b, pool, Config{})
	keys := make([]dedupe.Key, 256)
	kb := &benchKeys{prefix: randomHex(b, 4) + "-"}
	for i := range keys {
		keys[i] = kb.next()
		require.NoError(b, s.Mark(context.Background(), keys[i], time.Hour))
	}
	var n atomic.Int64
	compare64(b, []contender{
		{"store", func(ctx context.Context, lat *[]time.Duration) error {
			k := keys[n.Add(1)%int64(len(keys))]
			var status dedupe.Status
			err := timed(lat, func() (err error) {
				status, err = s.Claim(ctx, dedupe.NewClaim(k), time.Minute)
				return err
			})
			if err == nil && status != dedupe.Duplicate {
				err = errors.New("marked key not a duplicate: " + status.String())
			}
			return err
		}},
		{"raw", func(ctx context.Context, lat *[]time.Duration) error {
			k := keys[n.Add(1)%int64(len(keys))].String()
			var outcome int
			err := timed(lat, func() error {
				return pool.QueryRow(ctx, s.sql.claim, k, benchToken, benchLease).Scan(&outcome)
			})
			if err == nil && outcome != claimMarked {
				err = fmt.Errorf("claim statement on marked %s = %d", k, outcome)
			}
			return err
		}},
	})
}
