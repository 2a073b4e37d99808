package postgres

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/gatewaykit/dedupe"
)

// benchCallers is the number of concurrent callers of the parallel benchmarks.
const benchCallers = 64

// benchPoolSize bounds the pool shared by a benchmark and its baseline.
const benchPoolSize = 8

// benchKeys hands out keys never used before in this process.
type benchKeys struct {
	prefix string
	n      atomic.Int64
}

func (k *benchKeys) next() dedupe.Key {
	return dedupe.Key{Channel: "bench", MessageID: k.prefix + strconv.FormatInt(k.n.Add(1), 10)}
}

// parallel runs f from benchCallers goroutines.
func parallel(b *testing.B, f func(context.Context) error) {
	b.ReportAllocs()
	b.SetParallelism((benchCallers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := f(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkClaimMark measures 64 callers each claiming a new key and marking
// it, the work of Deduper.Do around a successful dispatch, beside the raw
// statements doing the same on the same pool: INSERT … ON CONFLICT DO NOTHING,
// then UPDATE.
func BenchmarkClaimMark(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	s := newTestStore(b, pool, Config{})
	raw := newTestStore(b, pool, Config{}) // for its table only
	keys := &benchKeys{prefix: randomHex(b, 4) + "-"}
	b.Run("store", func(b *testing.B) {
		parallel(b, func(ctx context.Context) error {
			k := keys.next()
			_, cSt, err := claimNew(ctx, s, k, time.Minute)
			if err != nil {
				return err
			}
			if cSt != dedupe.Claimed {
				return errors.New("new key not claimed: " + cSt.String())
			}
			return s.Mark(ctx, k, time.Hour)
		})
	})
	insert := `INSERT INTO ` + raw.table + ` (key, token, expires_at)
VALUES ($1, $2, now() + $3::bigint * interval '1 microsecond') ON CONFLICT DO NOTHING`
	update := `UPDATE ` + raw.table + ` SET token = NULL, expires_at = now() + $2::bigint * interval '1 microsecond' WHERE key = $1`
	b.Run("raw", func(b *testing.B) {
		parallel(b, func(ctx context.Context) error {
			k := keys.next().String()
			tag, err := pool.Exec(ctx, insert, k, "0123456789abcdef0123456789abcdef", int64(60e6))
			if err != nil {
				return err
			}
			if tag.RowsAffected() != 1 {
				return errors.New("new key not inserted")
			}
			_, err = pool.Exec(ctx, update, k, int64(3600e6))
			return err
		})
	})
}

// BenchmarkExists measures Exists of a marked key from one caller, beside a
// raw SELECT of the same row on the same pool.
func BenchmarkExists(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	s := newTestStore(b, pool, Config{})
	const marked = 64
	keys := make([]dedupe.Key, marked)
	kb := &benchKeys{prefix: randomHex(b, 4) + "-"}
	ctx := context.Background()
	for i := range keys {
		keys[i] = kb.next()
		if err := s.Mark(ctx, keys[i], time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("store", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			ok, err := s.Exists(ctx, keys[i%marked])
			if err != nil || !ok {
				b.Fatalf("Exists = %v, %v", ok, err)
			}
			i++
		}
	})
	query := `SELECT true FROM ` + s.table + ` WHERE key = $1 AND token IS NULL AND expires_at > now()`
	b.Run("raw", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			var ok bool
			err := pool.QueryRow(ctx, query, keys[i%marked].String()).Scan(&ok)
			if errors.Is(err, pgx.ErrNoRows) {
				err = nil
			}
			if err != nil || !ok {
				b.Fatalf("SELECT = %v, %v", ok, err)
			}
			i++
		}
	})
}

// BenchmarkClaimDuplicate measures 64 callers claiming keys that are already
// marked, the path of a redelivered message, beside the raw INSERT … ON
// CONFLICT DO NOTHING that finds the row there. Neither writes anything.
func BenchmarkClaimDuplicate(b *testing.B) {
	pool := newPool(b, "", benchPoolSize)
	s := newTestStore(b, pool, Config{})
	keys := make([]dedupe.Key, 256)
	kb := &benchKeys{prefix: randomHex(b, 4) + "-"}
	for i := range keys {
		keys[i] = kb.next()
		if err := s.Mark(context.Background(), keys[i], time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.Run("store", func(b *testing.B) {
		parallel(b, func(ctx context.Context) error {
			k := keys[n.Add(1)%int64(len(keys))]
			_, cSt, err := claimNew(ctx, s, k, time.Minute)
			if err == nil && cSt != dedupe.Duplicate {
				err = errors.New("marked key not a duplicate: " + cSt.String())
			}
			return err
		})
	})
	insert := `INSERT INTO ` + s.table + ` (key, token, expires_at)
VALUES ($1, $2, now() + $3::bigint * interval '1 microsecond') ON CONFLICT DO NOTHING`
	b.Run("raw", func(b *testing.B) {
		parallel(b, func(ctx context.Context) error {
			k := keys[n.Add(1)%int64(len(keys))]
			tag, err := pool.Exec(ctx, insert, k.String(), "0123456789abcdef0123456789abcdef", int64(60e6))
			if err == nil && tag.RowsAffected() != 0 {
				err = errors.New("marked key inserted")
			}
			return err
		})
	})
}
