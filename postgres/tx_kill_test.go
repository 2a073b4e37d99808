package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/killtest"
)

// Environment of the children of TestTxKill.
const (
	txKillMode    = "DEDUPE_TXKILL_MODE" // "tx" (DoTx) or "plain" (Deduper.Do)
	txKillTable   = "DEDUPE_TXKILL_TABLE"
	txKillEffects = "DEDUPE_TXKILL_EFFECTS"
	txKillKeys    = "DEDUPE_TXKILL_KEYS"
	txKillRounds  = "DEDUPE_TXKILL_ROUNDS" // rounds of TestTxKill (default 40)
)

// Two processes deliver copies of the same messages, each handler writing one
// effect row and then doing 5 ms of other work (the reply) (sending the reply),
// and both are SIGKILLed at random instants, round after round; a last process
// delivers every message once more. With DoTx every message's effect is
// applied exactly once; with the plain Do, whose mark commits after the
// effect, a kill between the two applies it twice.
func TestTxKill(t *testing.T) {
	rounds := 40
	if v, err := strconv.Atoi(os.Getenv(txKillRounds)); err == nil && v > 0 {
		rounds = v
	}
	for _, mode := range []string{"tx", "plain"} {
		t.Run(mode, func(t *testing.T) {
			table, effects := testTable(t), effectsTable(t)
			newTestStore(t, newPool(t, "", 0), Config{Table: table}) // creates the table
			keys := 2 * rounds
			cfg := killtest.Config{
				Test: "TestTxKillChild", Rounds: rounds, MaxDelay: 20 * time.Millisecond,
				Env: []string{txKillMode + "=" + mode, txKillTable + "=" + table,
					txKillEffects + "=" + effects, txKillKeys + "=" + strconv.Itoa(keys)},
			}
			killtest.Run(t, cfg)
			killtest.Finish(t, cfg)

			conn := adminConn(t)
			var applied, doubles, lost int
			err := conn.QueryRow(context.Background(), `SELECT count(DISTINCT key), count(*) - count(DISTINCT key) FROM `+effects).Scan(&applied, &doubles)
			require.NoError(t, err)
			lost = keys - applied
			t.Logf("%s: %d rounds of 2 processes SIGKILLed, %d messages: %d applied twice or more (extra effects %d), %d lost",
				mode, rounds, keys, doubles, doubles, lost)
			assert.Zero(t, lost, "%s: messages lost", mode)
			if mode == "tx" {
				assert.Zero(t, doubles, "DoTx: effects applied more than once")
			}
		})
	}
}

// TestTxKillChild is a child of TestTxKill: it delivers every message, from
// an offset both children of a round share, until it is killed.
func TestTxKillChild(t *testing.T) {
	mode := os.Getenv(txKillMode)
	if mode == "" {
		t.Skip("a child process of TestTxKill")
	}
	ctx := context.Background()
	pool := newPool(t, "", 4)
	s, err := New(ctx, pool, Config{Table: os.Getenv(txKillTable)})
	require.NoError(t, err)
	effects := os.Getenv(txKillEffects)
	keys, _ := strconv.Atoi(os.Getenv(txKillKeys))
	round := os.Getenv("KILLTEST_ROUND")
	h := fnv.New32a()
	h.Write([]byte(round))
	offset := int(h.Sum32()) % keys
	d := dedupe.New(s, dedupe.WithLease(300*time.Millisecond))
	defer d.Close()

	deliver := func(k dedupe.Key) error {
		insert := "INSERT INTO " + effects + " (key) VALUES ($1)"
		if mode == "tx" {
			return s.DoTx(ctx, k, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, insert, k.String())
				time.Sleep(5 * time.Millisecond) // the reply
				return err
			})
		}
		return d.Do(ctx, k, func(ctx context.Context) error {
			_, err := pool.Exec(ctx, insert, k.String())
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
			} else if !errors.Is(err, dedupe.ErrDuplicate) {
				require.NoError(t, err, "deliver %s", k)
			}
		}
		if left == 0 || round != "finish" {
			if round != "finish" {
				continue // until killed
			}
			return
		}
		require.LessOrEqual(t, pass, 100, "%d messages still in flight after %d passes", left, pass)
		time.Sleep(100 * time.Millisecond)
	}
}
