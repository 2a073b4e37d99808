package dedupe_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"

	"github.com/gatewaykit/dedupe"
)

// The bytes-per-mark benchmarks (issue 38) report what one remembered
// message costs each store, in the unit docs/sizing.md multiplies by a
// window's messages: B/mark, with the message id's and the key's lengths
// (id-B, key-B). The keys are Telegram's: "telegram:" and a ten-digit id.
// Beside each store is its anchor, the plainest way of keeping the same keys.

// sizeMarks is how many marks the bytes-per-mark benchmarks write: 200,000,
// or 20,000 where CI runs every benchmark once as a smoke test.
func sizeMarks() int {
	if n, err := strconv.Atoi(os.Getenv("DEDUPE_SIZE_MARKS")); err == nil && n > 0 {
		return n // DEDUPE_SIZE_MARKS, as in every module's bytes-per-mark benchmark
	}
	if os.Getenv("CI") != "" {
		return 20_000
	}
	return 200_000
}

// sizeKey is the i-th key of the size benchmarks.
func sizeKey(i int) dedupe.Key {
	return dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + i)}
}

// reportMarkBytes reports bytes/n as B/mark, with the ids' and keys' sizes.
func reportMarkBytes(b *testing.B, bytes int64, n int) {
	b.ReportMetric(float64(bytes)/float64(n), "B/mark")
	b.ReportMetric(float64(len(sizeKey(0).MessageID)), "id-B")
	b.ReportMetric(float64(len(sizeKey(0).String())), "key-B")
}

// BenchmarkMemoryBytesPerMark reports the live heap the memory store holds
// per mark (the keys' strings included) after Mark of sizeMarks keys with a
// 24 h TTL, from runtime.MemStats after a GC, beside golang-lru's
// expirable.LRU holding the same keys (impl=expirable).
//
//	go test -run '^$' -bench MemoryBytesPerMark -benchtime 1x -count 1 .
func BenchmarkMemoryBytesPerMark(b *testing.B) {
	ctx := context.Background()
	n := sizeMarks()
	for _, impl := range []struct {
		name string
		fill func(b *testing.B) (keep any)
	}{
		{"dedupe", func(b *testing.B) any {
			// Room to spare: MaxSize is shared out among the shards, and a
			// shard with more than its share of the keys would evict.
			st := dedupe.NewMemoryStore(dedupe.MemoryConfig{MaxSize: 2 * n})
			for i := range n {
				_ = st.Mark(ctx, sizeKey(i), 24*time.Hour)
			}
			if st.Len() != n {
				b.Fatalf("memory store holds %d marks, want %d", st.Len(), n)
			}
			return st
		}},
		{"expirable", func(*testing.B) any {
			c := expirable.NewLRU[dedupe.Key, struct{}](n, nil, 24*time.Hour)
			for i := range n {
				c.Add(sizeKey(i), struct{}{})
			}
			return c
		}},
	} {
		b.Run("impl="+impl.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				before := heapInUse()
				keep := impl.fill(b)
				after := heapInUse()
				runtime.KeepAlive(keep)
				reportMarkBytes(b, int64(after)-int64(before), n)
			}
		})
	}
}

// BenchmarkSQLiteBytesPerMark reports the bytes a mark adds to the SQLite
// file (the database and its WAL, after a TRUNCATE checkpoint) after
// sizeMarks marks, 24 h TTL, written by MarkUntil 1,000 at a time, beside a
// bare table of the same keys as a text primary key (impl=bare-pk).
//
//	go test -run '^$' -bench SQLiteBytesPerMark -benchtime 1x -count 1 .
func BenchmarkSQLiteBytesPerMark(b *testing.B) {
	n := sizeMarks()
	b.Run("impl=dedupe", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			path := filepath.Join(b.TempDir(), "d.db")
			s := benchStore(b, path, dedupe.SQLiteConfig{Now: time.Now})
			before := checkpointedSize(b, path)
			fillBulk(b, s, n)
			reportMarkBytes(b, checkpointedSize(b, path)-before, n)
		}
	})
	b.Run("impl=bare-pk", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			path := filepath.Join(b.TempDir(), "bare.db")
			db := benchBaselineDB(b, path, 1)
			mustExec(b, db, `CREATE TABLE bare (key TEXT PRIMARY KEY)`)
			before := checkpointedSize(b, path)
			tx, err := db.Begin()
			if err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if _, err := tx.Exec(`INSERT INTO bare (key) VALUES (?)`, sizeKey(i).String()); err != nil {
					b.Fatal(err)
				}
			}
			if err := tx.Commit(); err != nil {
				b.Fatal(err)
			}
			reportMarkBytes(b, checkpointedSize(b, path)-before, n)
		}
	})
}

// fillBulk marks sizeKey(0) to sizeKey(n-1) on s by MarkUntil, 1,000 at a
// time, expiring over the next 24 h.
func fillBulk(b *testing.B, s dedupe.BulkMarker, n int) {
	const batch = 1000
	now := time.Now()
	keys := make([]dedupe.Key, 0, batch)
	exps := make([]time.Time, 0, batch)
	for i := 0; i < n; i += batch {
		keys, exps = keys[:0], exps[:0]
		for j := i; j < min(i+batch, n); j++ {
			keys = append(keys, sizeKey(j))
			exps = append(exps, now.Add(time.Hour+23*time.Hour/time.Duration(n)*time.Duration(j))) // 23h*j overflows past j = 111,000
		}
		if _, err := s.MarkUntil(context.Background(), keys, exps); err != nil {
			b.Fatal(err)
		}
	}
}

// checkpointedSize copies the WAL of the database at path into it, truncates
// the WAL, and returns the bytes of the database and its WAL.
func checkpointedSize(b *testing.B, path string) int64 {
	db := benchBaselineDB(b, path, 1)
	mustExec(b, db, `PRAGMA wal_checkpoint(TRUNCATE)`)
	var total int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			total += fi.Size()
		}
	}
	return total
}

func mustExec(b *testing.B, db *sql.DB, q string) {
	if _, err := db.Exec(q); err != nil {
		b.Fatal(err)
	}
}
