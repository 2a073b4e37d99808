package dedupetest_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// A store's tests call Run from a test function, here for the memory store of
// package dedupe: New gives each store the suite's defaults and its clock
// (o.Now), so TTLs and leases pass without waiting. A store whose expiry is
// a server's clock sets RealTime instead, and leaves Now unused. go test
// compiles this example; the root package's TestMemoryConformance runs it.
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		dedupetest.Run(t, dedupetest.Config{
			New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
				return dedupe.NewMemoryStore(dedupe.MemoryConfig{
					TTL: o.TTL, Lease: o.Lease, MaxSize: o.MaxSize, Now: o.Now,
				})
			},
		})
	}
}

// A store kept in a database runs RunTx beside Run, with a table of effects
// in that database, here for the SQLite store of package dedupe, whose
// transactions are *sql.Tx. The stores of the run share one database file;
// keys are unique to each run.
func ExampleRunTx() {
	_ = func(t *testing.T) { // func TestTxConformance(t *testing.T)
		db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "gateway.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if _, err := db.Exec("CREATE TABLE effects (key TEXT NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		dedupetest.RunTx(t, dedupetest.TxConfig[*sql.Tx]{
			New: func(t *testing.T, o dedupetest.Options) dedupe.Store {
				s, err := dedupe.NewSQLiteStore(db, dedupe.SQLiteConfig{TTL: o.TTL, Lease: o.Lease})
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			Effect: func(ctx context.Context, tx *sql.Tx, k dedupe.Key) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO effects (key) VALUES (?)", k.String())
				return err
			},
			Effects: func(t *testing.T, _ dedupe.Store, k dedupe.Key) int {
				var n int
				if err := db.QueryRow("SELECT count(*) FROM effects WHERE key = ?", k.String()).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			},
		})
	}
}

// A Clock is the Now of a store under test: advancing it past the TTL
// expires a mark at once.
func ExampleClock() {
	clock := dedupetest.NewClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	store := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: time.Hour, Now: clock.Now})
	defer store.Close()
	ctx := context.Background()
	k := dedupe.Key{Channel: "telegram", MessageID: "1"}

	_ = store.Mark(ctx, k, 0) // 0: the store's TTL
	seen, _ := store.Exists(ctx, k)
	fmt.Println("marked:", seen)
	clock.Advance(time.Hour + time.Second)
	seen, _ = store.Exists(ctx, k)
	fmt.Println("an hour later:", seen)
	// Output:
	// marked: true
	// an hour later: false
}
