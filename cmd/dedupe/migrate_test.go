package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/migrate"
)

// seedDestination gives dst two keys of want before a copy: the first with
// a longer TTL than the source's (kept), the second with a shorter one
// (lengthened to the source's), and a claim on a third (replaced by the
// mark). It returns the expiries the destination must end with.
func seedDestination(t *testing.T, dst dedupe.Store, want map[dedupe.Key]time.Time) map[dedupe.Key]time.Time {
	t.Helper()
	ctx := context.Background()
	final := maps.Clone(want)
	i := 0
	for k := range want {
		switch i {
		case 0:
			require.NoError(t, dst.Mark(ctx, k, 30*24*time.Hour), "mark %s", k)
			final[k] = time.Now().Add(30 * 24 * time.Hour)
		case 1:
			require.NoError(t, dst.Mark(ctx, k, time.Minute), "mark %s", k)
		case 2:
			st, err := dst.Claim(ctx, dedupe.NewClaim(k), time.Hour)
			require.NoError(t, err, "claim %s", k)
			require.Equal(t, dedupe.Claimed, st, "claim %s", k)
		default:
			return final
		}
		i++
	}
	return final
}

// copyAndCheck migrates a NekoBot file of n marks (one in ten expired) to
// the store at to, seeded with two present marks and a claim, and checks the
// summary and every mark at the destination.
func copyAndCheck(t *testing.T, to string, n int) {
	f := writeNekoFile(t, n, 10)
	dst := open(t, to)
	final := seedDestination(t, dst, f.live)
	code, out, errOut := runCmd(t, "migrate", "--from", f.url(), "--to", to, "--checkpoint", filepath.Join(t.TempDir(), "cp.json"))
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	want := migrate.Summary{Listed: int64(n), Copied: int64(len(f.live) - 2), Present: 2, Expired: int64(f.expired)}
	require.Equal(t, want, summaryOf(t, out), "output:\n%s", out)
	checkCopied(t, dst, final)
}

// A NekoBot file copies to PostgreSQL: every live mark with its expiry,
// expired marks skipped, marks present at the destination counted and never
// shortened, a claim there replaced.
func TestMigrateSQLiteToPostgres(t *testing.T) { copyAndCheck(t, postgresURL(t), 5000) }

// The same to Redis.
func TestMigrateSQLiteToRedis(t *testing.T) { copyAndCheck(t, redisURL(t), 5000) }

// The same to a memory store's snapshot, which the copy writes.
func TestMigrateSQLiteToMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "marks.snapshot")
	f := writeNekoFile(t, 3000, 10)
	code, out, errOut := runCmd(t, "migrate", "--from", f.url(), "--to", "memory:"+path, "--batch", "70", "--checkpoint", filepath.Join(t.TempDir(), "cp.json"))
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	checkCopied(t, open(t, "memory:"+path), f.live)
}

// A memory store's snapshot copies to a SQLite file, claims left behind.
func TestMigrateMemoryToSQLite(t *testing.T) {
	ctx := context.Background()
	snap := filepath.Join(t.TempDir(), "marks.snapshot")
	src, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: snap, MaxSize: 10000})
	require.NoError(t, err, "open memory store")
	want := map[dedupe.Key]time.Time{}
	for i := range 2000 {
		k := dedupe.Key{Channel: "slack", MessageID: "T1:" + time.Duration(i).String()}
		ttl := time.Duration(i+1) * time.Minute
		require.NoError(t, src.Mark(ctx, k, ttl), "mark")
		want[k] = time.Now().Add(ttl)
	}
	_, err = src.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "slack", MessageID: "claimed"}), time.Hour)
	require.NoError(t, err, "claim")
	require.NoError(t, src.Close(), "close (writes the snapshot)")

	to := "sqlite:" + filepath.Join(t.TempDir(), "new.db")
	code, out, errOut := runCmd(t, "migrate", "--from", "memory:"+snap, "--to", to, "--batch", "300", "--checkpoint", filepath.Join(t.TempDir(), "cp.json"))
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	require.Equal(t, migrate.Summary{Listed: 2000, Copied: 2000}, summaryOf(t, out), "output:\n%s", out)
	checkCopied(t, open(t, to), want)
}

// PostgreSQL copies to Redis; a second run finds every mark present.
func TestMigratePostgresToRedis(t *testing.T) {
	ctx := context.Background()
	from, to := postgresURL(t), redisURL(t)
	src := open(t, from)
	want := map[dedupe.Key]time.Time{}
	var keys []dedupe.Key
	var exps []time.Time
	for i := range 3000 {
		k := dedupe.Key{Channel: "discord", MessageID: time.Duration(i * 977).String()}
		exp := time.Now().Add(time.Duration(i+60) * time.Second)
		keys, exps = append(keys, k), append(exps, exp)
		want[k] = exp
	}
	_, err := src.Store.(dedupe.BulkMarker).MarkUntil(ctx, keys, exps)
	require.NoError(t, err, "seed")
	_, err = src.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "discord", MessageID: "claimed"}), time.Hour)
	require.NoError(t, err, "claim")
	cp := filepath.Join(t.TempDir(), "cp.json")
	for run, wantSum := range []migrate.Summary{{Listed: 3000, Copied: 3000}, {Listed: 3000, Present: 3000}} {
		code, out, errOut := runCmd(t, "migrate", "--from", from, "--to", to, "--batch", "512", "--checkpoint", cp)
		require.Equal(t, exitOK, code, "run %d: output:\n%s%s", run, out, errOut)
		require.Equal(t, wantSum, summaryOf(t, out), "run %d", run)
	}
	checkCopied(t, open(t, to), want)
}

// Redis copies to PostgreSQL (SCAN order, not key order).
func TestMigrateRedisToPostgres(t *testing.T) {
	from, to := redisURL(t), postgresURL(t)
	f := writeNekoFile(t, 2000, 0)
	code, out, errOut := runCmd(t, "migrate", "--from", f.url(), "--to", from, "--checkpoint", filepath.Join(t.TempDir(), "a.json"))
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	code, out, errOut = runCmd(t, "migrate", "--from", from, "--to", to, "--batch", "100", "--checkpoint", filepath.Join(t.TempDir(), "b.json"))
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	require.Equal(t, migrate.Summary{Listed: 2000, Copied: 2000}, summaryOf(t, out), "output:\n%s", out)
	checkCopied(t, open(t, to), f.live)
}

// A dry run writes nothing, leaves no checkpoint and counts what a copy
// would do, the present marks included.
func TestMigrateDryRun(t *testing.T) {
	to := postgresURL(t)
	f := writeNekoFile(t, 1000, 4)
	dst := open(t, to)
	seedDestination(t, dst, f.live)
	cp := filepath.Join(t.TempDir(), "cp.json")
	code, out, errOut := runCmd(t, "migrate", "--dry-run", "--from", f.url(), "--to", to, "--checkpoint", cp)
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	require.Equal(t, migrate.Summary{Listed: 1000, Copied: 750 - 2, Present: 2, Expired: 250}, summaryOf(t, out))
	require.Len(t, marks(t, dst), 2, "a dry run wrote marks at the destination")
	assert.Contains(t, out, "dry run", "output does not say it was a dry run")
}

// A dry run into a destination that does not exist yet (a missing SQLite
// file, a SQLite file without the table, a missing PostgreSQL table) says
// what a copy would create, counts every live mark as to be copied and
// creates nothing; a SQLite file in a missing directory, which a copy could
// not create either, still fails. Before, each of the three exited 1 with
// "open --to: … does not exist".
func TestMigrateDryRunNewDestination(t *testing.T) {
	f := writeNekoFile(t, 400, 4)
	dir := t.TempDir()
	other := filepath.Join(dir, "other.db")
	seeded, err := dedupe.OpenSQLite(other, dedupe.SQLiteConfig{Table: "seen"})
	require.NoError(t, err)
	require.NoError(t, seeded.Close())
	pg := postgresURL(t)
	for _, c := range []struct {
		name, to, create string
		exists           func() bool // whether the destination was created
	}{
		{"sqlite file", "sqlite:" + filepath.Join(dir, "new.db"), "the SQLite file",
			func() bool { _, err := os.Stat(filepath.Join(dir, "new.db")); return err == nil }},
		{"sqlite table", "sqlite:" + other + "?table=marks", "table marks in the SQLite file",
			func() bool { return sqliteHasTable(t, other, "marks") }},
		{"postgres table", pg, "does not exist",
			func() bool { _, err := openStore(context.Background(), pg, source); return err == nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runCmd(t, "migrate", "--dry-run", "--from", f.url(), "--to", c.to,
				"--checkpoint", filepath.Join(t.TempDir(), "cp.json"))
			require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
			assert.Contains(t, out, "a copy would create")
			assert.Contains(t, out, c.create)
			assert.Equal(t, migrate.Summary{Listed: 400, Copied: 300, Expired: 100}, summaryOf(t, out))
			assert.False(t, c.exists(), "a dry run created the destination")
		})
	}
	code, out, errOut := runCmd(t, "migrate", "--dry-run", "--from", f.url(), "--to", "sqlite:"+filepath.Join(dir, "none", "new.db"))
	assert.Equal(t, exitFailure, code, "output:\n%s%s", out, errOut)
}

// sqliteHasTable reports whether the SQLite file at path has the table.
func sqliteHasTable(t *testing.T, path, table string) bool {
	t.Helper()
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{Table: table, ReadOnly: true})
	if err == nil {
		require.NoError(t, s.Close())
	}
	return err == nil
}

// Bad command lines exit with 2, failures with 1.
func TestMigrateExitCodes(t *testing.T) {
	dir := t.TempDir()
	f := writeNekoFile(t, 10, 0)
	for _, c := range []struct {
		args []string
		code int
	}{
		{nil, exitUsage},
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"migrate", "--from", f.url()}, exitUsage},
		{[]string{"migrate", "--from", f.url(), "--to", f.url()}, exitUsage},
		{[]string{"migrate", "--from", f.url(), "--to", "ftp://x"}, exitUsage},
		{[]string{"migrate", "--from", f.url(), "--to", "memory:" + filepath.Join(dir, "m"), "--batch", "0"}, exitUsage},
		{[]string{"stats"}, exitUsage},
		{[]string{"migrate", "--from", "sqlite:" + filepath.Join(dir, "missing.db"), "--to", "memory:" + filepath.Join(dir, "m")}, exitFailure},
		{[]string{"migrate", "--from", f.url(), "--to", "sqlite:" + filepath.Join(dir, "no", "such", "dir.db")}, exitFailure},
		{[]string{"migrate", "--from", f.url(), "--to", "memory:" + filepath.Join(dir, "m"), "--checkpoint", filepath.Join(dir, "cp.json")}, exitOK},
	} {
		code, out, errOut := runCmd(t, c.args...)
		assert.Equal(t, c.code, code, "%q: output:\n%s%s", c.args, out, errOut)
	}
}
