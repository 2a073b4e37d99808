package dedupe_test

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// The SQLite benchmarks put a baseline beside the store in the same run: the
// plain way of doing the same job with database/sql on the same file, schema
// and pragmas (WAL, synchronous=FULL, a 5 s busy timeout). The sub-benchmarks
// are named impl=..., baseline first, so that benchstat compares them:
//
//	go test -run '^$' -bench 'SQLite' -count 6 . | tee bench.txt
//	benchstat -col /impl bench.txt

const benchCallers = 64

// benchClock is the fixed clock of the benchmarks' stores.
var benchClock = time.Date(2026, 11, 29, 20, 30, 0, 0, time.UTC)

func benchStore(b *testing.B, path string, cfg dedupe.SQLiteConfig) *dedupe.SQLiteStore {
	b.Helper()
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return benchClock }
	}
	cfg.Location = time.UTC
	s, err := dedupe.OpenSQLite(path, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// benchBaselineDB opens path as a plain database/sql pool with the store's
// pragmas. maxConns 0 leaves the pool unbounded.
func benchBaselineDB(b *testing.B, path string, maxConns int) *sql.DB {
	b.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)")
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(max(maxConns, benchCallers))
	b.Cleanup(func() { _ = db.Close() })
	return db
}

func benchPrepare(b *testing.B, db *sql.DB, q string) *sql.Stmt {
	b.Helper()
	st, err := db.Prepare(q)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	return st
}

// runCallers runs f from benchCallers goroutines (RunParallel with enough
// parallelism for the machine's GOMAXPROCS), each call with a new number.
func runCallers(b *testing.B, f func(i int64) error) {
	b.Helper()
	var seq atomic.Int64
	b.SetParallelism((benchCallers + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := f(seq.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

const (
	benchMarkSQL = `INSERT INTO gateway_dedupe (dedupe_key, channel_id, message_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?)
ON CONFLICT(dedupe_key) DO UPDATE SET expires_at = excluded.expires_at`
	benchClaimSQL = `INSERT INTO gateway_dedupe_claims (dedupe_key, token, expires_at) VALUES (?, ?, ?) ON CONFLICT(dedupe_key) DO NOTHING`
)

// BenchmarkSQLiteMark64 is 64 concurrent callers of Mark with synchronous=FULL.
// The baselines run NekoBot's upsert as its own transaction per call, from an
// unbounded pool and from a single connection.
func BenchmarkSQLiteMark64(b *testing.B) {
	for _, conns := range []int{1, 0} {
		b.Run(map[int]string{0: "impl=pool", 1: "impl=1conn"}[conns], func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "d.db")
			_ = benchStore(b, path, dedupe.SQLiteConfig{}).Close() // the schema
			st := benchPrepare(b, benchBaselineDB(b, path, conns), benchMarkSQL)
			created, expires := benchClock.Format("2006-01-02T15:04:05"), benchClock.Add(time.Hour).Format("2006-01-02T15:04:05")
			runCallers(b, func(i int64) error {
				id := strconv.FormatInt(i, 10)
				_, err := st.Exec("bench:"+id, "bench", id, created, expires)
				return err
			})
		})
	}
	b.Run("impl=store", func(b *testing.B) {
		s := benchStore(b, filepath.Join(b.TempDir(), "d.db"), dedupe.SQLiteConfig{})
		ctx := context.Background()
		runCallers(b, func(i int64) error {
			return s.Mark(ctx, dedupe.Key{Channel: "bench", MessageID: strconv.FormatInt(i, 10)}, time.Hour)
		})
	})
}

// BenchmarkSQLiteClaimMark64 is 64 concurrent callers of Claim then Mark of a
// new key (the Deduper's path for a message processed once), synchronous=FULL.
// The baselines insert the claim and upsert the mark as a transaction each.
func BenchmarkSQLiteClaimMark64(b *testing.B) {
	for _, conns := range []int{1, 0} {
		b.Run(map[int]string{0: "impl=pool", 1: "impl=1conn"}[conns], func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "d.db")
			_ = benchStore(b, path, dedupe.SQLiteConfig{}).Close()
			db := benchBaselineDB(b, path, conns)
			claim, mark := benchPrepare(b, db, benchClaimSQL), benchPrepare(b, db, benchMarkSQL)
			created, expires := benchClock.Format("2006-01-02T15:04:05"), benchClock.Add(time.Hour).Format("2006-01-02T15:04:05")
			lease := benchClock.Add(time.Minute).UnixNano()
			runCallers(b, func(i int64) error {
				id := strconv.FormatInt(i, 10)
				res, err := claim.Exec("bench:"+id, id, lease)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n != 1 {
					return fmt.Errorf("claim bench:%s: not claimed", id)
				}
				_, err = mark.Exec("bench:"+id, "bench", id, created, expires)
				return err
			})
		})
	}
	b.Run("impl=store", func(b *testing.B) {
		s := benchStore(b, filepath.Join(b.TempDir(), "d.db"), dedupe.SQLiteConfig{})
		ctx := context.Background()
		runCallers(b, func(i int64) error {
			k := dedupe.Key{Channel: "bench", MessageID: strconv.FormatInt(i, 10)}
			_, cSt, err := claimNew(ctx, s, k, time.Minute)
			if err != nil {
				return err
			}
			if cSt != dedupe.Claimed {
				return fmt.Errorf("claim %s: %v", k, cSt)
			}
			return s.Mark(ctx, k, time.Hour)
		})
	})
}

// fillMarks inserts n marks bench:{from}..bench:{from+n-1} expiring at exp in
// one statement, and as many claims when claims is set.
func fillMarks(tb testing.TB, path string, from, n int, exp time.Time, claims bool) {
	tb.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(5000)&_pragma=synchronous(OFF)")
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	q := `WITH RECURSIVE c(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM c WHERE i < ?1 + ?2 - 1)
INSERT INTO gateway_dedupe (dedupe_key, channel_id, message_id, created_at, expires_at)
SELECT printf('bench:%07d', i), 'bench', printf('%07d', i), ?3, ?4 FROM c`
	if _, err := db.Exec(q, from, n, exp.Add(-time.Hour).Format("2006-01-02T15:04:05.000000"), exp.Format("2006-01-02T15:04:05.000000")); err != nil {
		tb.Fatal(err)
	}
	if claims {
		q := `WITH RECURSIVE c(i) AS (SELECT ?1 UNION ALL SELECT i + 1 FROM c WHERE i < ?1 + ?2 - 1)
INSERT INTO gateway_dedupe_claims (dedupe_key, token, expires_at) SELECT 'claim:' || i, 'tok' || i, ?3 FROM c`
		if _, err := db.Exec(q, from, n, exp.UnixNano()); err != nil {
			tb.Fatal(err)
		}
	}
}

// buildMarks fills the marks table of path, which no connection has open,
// with rows marks bench:0000000... expiring at exp, as fast as SQLite goes:
// no journal, the expires_at index built at the end. It leaves the file in WAL
// mode.
func buildMarks(b *testing.B, path string, rows int, exp time.Time) {
	b.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)&_pragma=cache_size(-200000)&_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"DROP INDEX idx_gateway_dedupe_expires",
		`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < ?1 - 1)
INSERT INTO gateway_dedupe (dedupe_key, channel_id, message_id, created_at, expires_at)
SELECT 'bench:' || substr('000000' || i, -7), 'bench', substr('000000' || i, -7), ?2, ?3 FROM c`,
		"CREATE INDEX idx_gateway_dedupe_expires ON gateway_dedupe(expires_at)",
		"PRAGMA journal_mode = WAL",
	} {
		if _, err := db.Exec(q, rows, exp.Add(-time.Hour).Format("2006-01-02T15:04:05.000000"), exp.Format("2006-01-02T15:04:05.000000")); err != nil {
			b.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		b.Fatal(err)
	}
	// Written with synchronous OFF, the file's pages are still dirty in the
	// OS cache: flush them now, so that the kernel's writeback does not slow
	// the fsyncs of the store measured next.
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSQLiteExists1M looks up present keys, chosen at random, in a table
// of a million marks. The baseline is a raw prepared point lookup of the same
// row (no key validation, no expiry parsing). Building the table takes several
// seconds; a run with -benchtime 1x (CI, which only checks that benchmarks
// still run) or -short builds 100,000 rows instead.
func BenchmarkSQLiteExists1M(b *testing.B) {
	rows := 1_000_000
	if f := flag.Lookup("test.benchtime"); testing.Short() || f != nil && f.Value.String() == "1x" {
		rows = 100_000
	}
	path := filepath.Join(b.TempDir(), "d.db")
	_ = benchStore(b, path, dedupe.SQLiteConfig{}).Close()
	start := time.Now()
	buildMarks(b, path, rows, benchClock.Add(time.Hour))
	b.Logf("built %d rows in %v", rows, time.Since(start).Round(time.Millisecond))

	r := rand.New(rand.NewPCG(1, 2))
	// keys=random spreads the lookups over the table, so most read pages
	// from the file (the OS cache); keys=hot repeats 16 keys, whose pages stay
	// in SQLite's cache, and shows the store's own overhead.
	for _, set := range []struct {
		name string
		n    int
	}{{"random", 4096}, {"hot", 16}} {
		keys := make([]dedupe.Key, set.n)
		texts := make([]string, set.n)
		for i := range keys {
			keys[i] = dedupe.Key{Channel: "bench", MessageID: fmt.Sprintf("%07d", r.IntN(rows))}
			texts[i] = keys[i].String()
		}
		b.Run("keys="+set.name+"/impl=raw", func(b *testing.B) {
			st := benchPrepare(b, benchBaselineDB(b, path, 0), "SELECT expires_at FROM gateway_dedupe WHERE dedupe_key = ?")
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				var exp sql.NullString
				if err := st.QueryRow(texts[i%len(texts)]).Scan(&exp); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("keys="+set.name+"/impl=store", func(b *testing.B) {
			s := benchStore(b, path, dedupe.SQLiteConfig{})
			ctx := context.Background()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				ok, err := s.Exists(ctx, keys[i%len(keys)])
				if err != nil || !ok {
					b.Fatalf("Exists(%s) = %v, %v", keys[i%len(keys)], ok, err)
				}
			}
		})
	}
}

// BenchmarkSQLiteCleanupExpired removes 20,000 expired marks and 20,000 expired
// claims (among 20,000 live marks) per iteration and reports rows/s. The
// baseline is NekoBot's cleanup, one DELETE of every expired mark and claim.
func BenchmarkSQLiteCleanupExpired(b *testing.B) {
	const expired, live = 20_000, 20_000
	setup := func(b *testing.B) string {
		path := filepath.Join(b.TempDir(), "d.db")
		_ = benchStore(b, path, dedupe.SQLiteConfig{}).Close()
		fillMarks(b, path, expired, live, benchClock.Add(time.Hour), false)
		return path
	}
	// run times remove, after refilling the expired rows untimed, and reports
	// the rows it removed per second.
	run := func(b *testing.B, path string, remove func() (int64, error)) {
		b.ReportAllocs()
		var total int64
		var elapsed time.Duration
		for b.Loop() {
			b.StopTimer()
			fillMarks(b, path, 0, expired, benchClock.Add(-time.Minute), true)
			b.StartTimer()
			start := time.Now()
			n, err := remove()
			elapsed += time.Since(start)
			if err != nil || n != 2*expired {
				b.Fatalf("removed %d, %v; want %d", n, err, 2*expired)
			}
			total += n
		}
		b.ReportMetric(float64(total)/elapsed.Seconds(), "rows/s")
	}
	b.Run("impl=delete", func(b *testing.B) {
		path := setup(b)
		db := benchBaselineDB(b, path, 1)
		now := benchClock.Format("2006-01-02T15:04:05.000000")
		run(b, path, func() (int64, error) {
			r1, err := db.Exec("DELETE FROM gateway_dedupe WHERE expires_at < ?", now)
			if err != nil {
				return 0, err
			}
			r2, err := db.Exec("DELETE FROM gateway_dedupe_claims WHERE expires_at <= ?", benchClock.UnixNano())
			if err != nil {
				return 0, err
			}
			n1, _ := r1.RowsAffected()
			n2, _ := r2.RowsAffected()
			return n1 + n2, nil
		})
	})
	b.Run("impl=store", func(b *testing.B) {
		path := setup(b)
		s := benchStore(b, path, dedupe.SQLiteConfig{})
		run(b, path, func() (int64, error) { return s.CleanupExpired(context.Background()) })
	})
}
