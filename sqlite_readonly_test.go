package dedupe_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// fileState is what a read-only open must leave as it was: the bytes of the
// database file, and which journal files sit beside it.
func fileState(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	state := string(sum[:])
	for _, ext := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(path + ext); err == nil {
			state += ext
		}
	}
	return state
}

// A store opened with ReadOnly on NekoBot's file (rollback journal) reads
// its marks, refuses every write with ErrReadOnly, and leaves the file
// byte for byte as it was: no claims or results table, no WAL.
func TestSQLiteReadOnlyLeavesFile(t *testing.T) {
	path := nekobotFixture(t)
	before := fileState(t, path)
	ctx := context.Background()
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{ReadOnly: true, Location: time.UTC,
		Now: func() time.Time { return sqliteT0 }})
	require.NoError(t, err)

	live, err := s.Exists(ctx, dedupe.Key{Channel: "qq", MessageID: "1001"})
	require.NoError(t, err)
	assert.True(t, live, "qq:1001 is live at %v", sqliteT0)
	marks, claims, _, _, err := s.CountLive(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), marks)
	assert.Zero(t, claims, "no claims table: no claims")
	_, ok, err := s.Result(ctx, dedupe.Key{Channel: "qq", MessageID: "1001"})
	require.NoError(t, err)
	assert.False(t, ok)

	k := dedupe.Key{Channel: "qq", MessageID: "9"}
	assert.ErrorIs(t, s.Mark(ctx, k, 0), dedupe.ErrReadOnly)
	_, err = s.Claim(ctx, dedupe.NewClaim(k), 0)
	assert.ErrorIs(t, err, dedupe.ErrReadOnly)
	_, err = s.MarkUntil(ctx, []dedupe.Key{k}, []time.Time{sqliteT0.Add(time.Hour)})
	assert.ErrorIs(t, err, dedupe.ErrReadOnly)
	_, err = s.CleanupExpired(ctx)
	assert.ErrorIs(t, err, dedupe.ErrReadOnly)
	assert.ErrorIs(t, s.DoTx(ctx, k, func(context.Context, *sql.Tx) error { return nil }), dedupe.ErrReadOnly)
	_, err = s.Forget(ctx, k)
	assert.ErrorIs(t, err, dedupe.ErrReadOnly)
	require.NoError(t, s.Close())

	assert.Equal(t, before, fileState(t, path), "the file changed")
	db := rawDB(t, path)
	var mode string
	require.NoError(t, db.QueryRow("PRAGMA journal_mode").Scan(&mode))
	assert.Equal(t, "delete", mode)
	var n int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'gateway_dedupe_%'").Scan(&n))
	assert.Zero(t, n, "tables created")
}

// ReadOnly refuses a marks table that does not exist, naming it, and a
// missing file, and creates neither.
func TestSQLiteReadOnlyMissing(t *testing.T) {
	path := nekobotFixture(t)
	before := fileState(t, path)
	_, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{ReadOnly: true, Table: "typo"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "table typo does not exist")
	assert.Equal(t, before, fileState(t, path), "the file changed")

	missing := filepath.Join(t.TempDir(), "none.db")
	_, err = dedupe.OpenSQLite(missing, dedupe.SQLiteConfig{ReadOnly: true})
	require.Error(t, err)
	assert.NoFileExists(t, missing)

	_, err = dedupe.OpenSQLite(path, dedupe.SQLiteConfig{ReadOnly: true, CleanupInterval: time.Minute})
	assert.ErrorContains(t, err, "ReadOnly")
}

// A NekoBot file written in a zone 8 h east of the store's Location reads
// as created 8 h in the future: the store warns and names the setting. A
// file in the right zone gives no warning.
func TestSQLiteWarnsFutureMarks(t *testing.T) {
	east := time.FixedZone("UTC+8", 8*3600)
	for _, c := range []struct {
		name string
		loc  *time.Location
		warn bool
	}{{"wrong zone", time.UTC, true}, {"right zone", east, false}} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "gateway.db")
			w := openSQLite(t, path, dedupe.SQLiteConfig{Location: east, Now: func() time.Time { return sqliteT0 }})
			require.NoError(t, w.Mark(context.Background(), dedupe.Key{Channel: "qq", MessageID: "1"}, time.Hour))
			require.NoError(t, w.Close())

			var log bytes.Buffer
			s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{ReadOnly: true, Location: c.loc,
				Now: func() time.Time { return sqliteT0 }, Logger: slog.New(slog.NewTextHandler(&log, nil))})
			require.NoError(t, err)
			require.NoError(t, s.Close())
			if !c.warn {
				assert.Empty(t, log.String())
				return
			}
			assert.Contains(t, log.String(), "created in the future")
			assert.Contains(t, log.String(), "SQLiteConfig.Location")
			assert.Contains(t, log.String(), "ahead=8h0m0s")
		})
	}
}
