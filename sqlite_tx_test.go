package dedupe_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
	"github.com/gatewaykit/dedupe/dedupetest/killtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// openEffects opens the database file at path beside a store, with a table
// of effects, one row per run of a handler.
func openEffects(t *testing.T, path string) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	_, err = db.Exec("CREATE TABLE IF NOT EXISTS effects (key TEXT NOT NULL)")
	require.NoError(t, err)
	return db
}

func insertEffect(ctx context.Context, tx *sql.Tx, k dedupe.Key) error {
	_, err := tx.ExecContext(ctx, "INSERT INTO effects (key) VALUES (?)", k.String())
	return err
}

func effectsOf(t *testing.T, db *sql.DB, k dedupe.Key) int {
	var n int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM effects WHERE key = ?", k.String()).Scan(&n))
	return n
}

// The conformance tests of DoTx, on a store that opens its file and on one
// over a database the caller opened (in the rollback-journal mode, with
// another table name), each with a table of effects in its file.
func TestSQLiteTxConformance(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T, path string) dedupe.Store
	}{
		{"file", func(t *testing.T, path string) dedupe.Store {
			s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
			require.NoError(t, err)
			return s
		}},
		{"caller-owned", func(t *testing.T, path string) dedupe.Store {
			s, err := dedupe.NewSQLiteStore(rawDB(t, path), dedupe.SQLiteConfig{Table: "Dedupe_2"})
			require.NoError(t, err)
			return s
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "tx.db") // the stores of the run share it
			effects := openEffects(t, path)
			dedupetest.RunTx(t, dedupetest.TxConfig[*sql.Tx]{
				New:    func(t *testing.T, _ dedupetest.Options) dedupe.Store { return tc.open(t, path) },
				Effect: insertEffect,
				Effects: func(t *testing.T, _ dedupe.Store, k dedupe.Key) int {
					return effectsOf(t, effects, k)
				},
			})
		})
	}
}

// Of concurrent DoTx calls of one key, one runs fn.
func TestSQLiteDoTxConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tx.db")
	s := openSQLite(t, path, dedupe.SQLiteConfig{})
	openEffects(t, path)
	const keys, copies = 10, 6
	var runs atomic.Int64
	var wg sync.WaitGroup
	for i := range keys {
		k := dedupe.Key{Channel: "tx", MessageID: fmt.Sprint(i)}
		for range copies {
			wg.Go(func() {
				err := s.DoTx(context.Background(), k, func(ctx context.Context, tx *sql.Tx) error {
					runs.Add(1)
					return insertEffect(ctx, tx, k)
				})
				if err != nil && !errors.Is(err, dedupe.ErrDuplicate) {
					assert.NoError(t, err, "DoTx")
				}
			})
		}
	}
	wg.Wait()
	assert.Equal(t, int64(keys), runs.Load())
}

// Environment of the children of TestSQLiteTxKill.
const (
	sqliteTxMode   = "DEDUPE_SQLITE_TXKILL_MODE" // "tx" (DoTx) or "plain" (Deduper.Do)
	sqliteTxPath   = "DEDUPE_SQLITE_TXKILL_PATH"
	sqliteTxKeys   = "DEDUPE_SQLITE_TXKILL_KEYS"
	sqliteTxRounds = "DEDUPE_SQLITE_TXKILL_ROUNDS" // rounds (default 40)
)

// Two processes deliver copies of the same messages to one SQLite file, each
// handler writing one effect row and then doing 5 ms of other work (the reply),
// and both are SIGKILLed at random instants, round after round; a last
// process delivers every message once more. With DoTx every effect is
// applied exactly once; with the plain Do a kill between the effect and the
// mark applies it twice.
func TestSQLiteTxKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	rounds := 40
	if v, err := strconv.Atoi(os.Getenv(sqliteTxRounds)); err == nil && v > 0 {
		rounds = v
	}
	for _, mode := range []string{"tx", "plain"} {
		t.Run(mode, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kill.db")
			openSQLite(t, path, dedupe.SQLiteConfig{})
			effects := openEffects(t, path)
			keys := 2 * rounds
			cfg := killtest.Config{
				Test: "TestSQLiteTxKillChild", Rounds: rounds, MaxDelay: 20 * time.Millisecond,
				Env: []string{sqliteTxMode + "=" + mode, sqliteTxPath + "=" + path, sqliteTxKeys + "=" + strconv.Itoa(keys)},
			}
			killtest.Run(t, cfg)
			killtest.Finish(t, cfg)
			var applied, extra int
			require.NoError(t, effects.QueryRow("SELECT count(DISTINCT key), count(*) - count(DISTINCT key) FROM effects").Scan(&applied, &extra))
			t.Logf("%s: %d rounds of 2 processes SIGKILLed, %d messages: %d extra effects, %d lost", mode, rounds, keys, extra, keys-applied)
			assert.Equal(t, keys, applied, "messages lost")
			if mode == "tx" {
				assert.Zero(t, extra, "DoTx: effects applied more than once")
			}
		})
	}
}

// TestSQLiteTxKillChild is a child of TestSQLiteTxKill: it delivers every
// message, from an offset both children of a round share, until killed.
func TestSQLiteTxKillChild(t *testing.T) {
	mode := os.Getenv(sqliteTxMode)
	if mode == "" {
		t.Skip("a child process of TestSQLiteTxKill")
	}
	ctx := context.Background()
	path := os.Getenv(sqliteTxPath)
	s := openSQLite(t, path, dedupe.SQLiteConfig{BusyTimeout: 30 * time.Second})
	effects := openEffects(t, path)
	keys, _ := strconv.Atoi(os.Getenv(sqliteTxKeys))
	round := os.Getenv("KILLTEST_ROUND")
	h := fnv.New32a()
	h.Write([]byte(round))
	offset := int(h.Sum32() % uint32(keys))
	d := dedupe.New(s, dedupe.WithLease(300*time.Millisecond))
	defer d.Close()
	deliver := func(k dedupe.Key) error {
		if mode == "tx" {
			return s.DoTx(ctx, k, func(ctx context.Context, tx *sql.Tx) error {
				err := insertEffect(ctx, tx, k)
				time.Sleep(5 * time.Millisecond) // the reply
				return err
			})
		}
		return d.Do(ctx, k, func(ctx context.Context) error {
			_, err := effects.ExecContext(ctx, "INSERT INTO effects (key) VALUES (?)", k.String())
			time.Sleep(5 * time.Millisecond)
			return err
		})
	}
	killtest.Ready()
	for pass := 0; ; pass++ {
		left := 0
		for i := range keys {
			k := dedupe.Key{Channel: "txkill", MessageID: fmt.Sprint((offset + i) % keys)}
			err := deliver(k)
			if errors.Is(err, dedupe.ErrInFlight) {
				left++ // a killed process's claim: its lease runs out
			} else if err != nil && !errors.Is(err, dedupe.ErrDuplicate) {
				require.NoError(t, err, "deliver %s", k)
			}
		}
		if round != "finish" {
			continue // until killed
		}
		if left == 0 {
			return
		}
		require.Less(t, pass, 100, "%d messages still in flight", left)
		time.Sleep(100 * time.Millisecond)
	}
}

// MarkResultTx writes in the caller's transaction on the store's file, also
// one the caller began on its own connection pool, and refuses a nil
// transaction, a closed store and a read-only one.
func TestSQLiteMarkResultTx(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tx.db")
	s := openSQLite(t, path, dedupe.SQLiteConfig{})
	db := openEffects(t, path)
	ctx := context.Background()
	k := dedupe.Key{Channel: "tx", MessageID: "result"}

	tx, err := db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, s.MarkResultTx(ctx, tx, k, []byte("answer"), time.Hour))
	res, marked, err := s.Result(ctx, k)
	require.NoError(t, err)
	assert.False(t, marked, "not visible before the commit")
	assert.Nil(t, res)
	require.NoError(t, tx.Commit())
	res, marked, err = s.Result(ctx, k)
	require.NoError(t, err)
	assert.True(t, marked)
	assert.Equal(t, []byte("answer"), res)

	assert.ErrorContains(t, s.MarkResultTx(ctx, nil, k, nil, 0), "nil transaction")
	tx, err = db.BeginTx(ctx, nil)
	require.NoError(t, err)
	defer tx.Rollback()
	assert.ErrorIs(t, s.MarkResultTx(ctx, tx, dedupe.Key{Channel: "a:b", MessageID: "1"}, nil, 0), dedupe.ErrInvalidKey)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.MarkResultTx(ctx, tx, k, nil, 0), dedupe.ErrClosed)

	ro := openSQLite(t, path, dedupe.SQLiteConfig{ReadOnly: true})
	assert.ErrorIs(t, ro.MarkResultTx(ctx, tx, k, nil, 0), dedupe.ErrReadOnly)
}
