package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nekobotCopy copies NekoBot's own database (rollback journal) into a
// temporary directory, or skips when the shared test data is absent.
func nekobotCopy(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "..", "shared", "testdata", "nekobot", "gateway.db")
	in, err := os.Open(src)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("NekoBot fixture %s is absent (the shared test data sits beside the repository)", src)
	}
	require.NoError(t, err)
	defer in.Close()
	dst := filepath.Join(t.TempDir(), "gateway.db")
	out, err := os.Create(dst)
	require.NoError(t, err)
	_, err = io.Copy(out, in)
	require.NoError(t, err)
	require.NoError(t, out.Close())
	return dst
}

// fileState is the bytes of a database file and the journal files beside it.
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

// stats, migrate --from and --dry-run leave a live NekoBot file (rollback
// journal) byte for byte as it was: no tables created, no switch to WAL.
func TestReadOnlyCommandsLeaveNekoBotFile(t *testing.T) {
	dir := t.TempDir()
	gen := writeNekoFile(t, 500, 10) // a source for the dry run into NekoBot's file
	for _, c := range []struct {
		name string
		args func(neko string) []string
	}{
		{"stats", func(neko string) []string { return []string{"stats", "sqlite:" + neko + "?tz=UTC"} }},
		{"migrate --from", func(neko string) []string {
			return []string{"migrate", "--from", "sqlite:" + neko + "?tz=UTC", "--to", "memory:" + filepath.Join(dir, "a.snapshot"),
				"--checkpoint", filepath.Join(dir, "a.json")}
		}},
		{"migrate --dry-run --from", func(neko string) []string {
			return []string{"migrate", "--dry-run", "--from", "sqlite:" + neko + "?tz=UTC", "--to", gen.url()}
		}},
		{"migrate --dry-run --to", func(neko string) []string {
			return []string{"migrate", "--dry-run", "--from", gen.url(), "--to", "sqlite:" + neko + "?tz=UTC"}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			neko := nekobotCopy(t)
			before, genBefore := fileState(t, neko), fileState(t, gen.path)
			code, out, errOut := runCmd(t, c.args(neko)...)
			require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
			assert.Equal(t, before, fileState(t, neko), "NekoBot's file changed")
			assert.Equal(t, genBefore, fileState(t, gen.path), "the other file changed")
		})
	}
}

// A source table that does not exist is an error naming it, with exit
// status 1, and nothing is created in the file.
func TestMissingSourceTable(t *testing.T) {
	neko := nekobotCopy(t)
	before := fileState(t, neko)
	dir := t.TempDir()
	for _, args := range [][]string{
		{"stats", "sqlite:" + neko + "?table=typo"},
		{"migrate", "--from", "sqlite:" + neko + "?table=typo", "--to", "memory:" + filepath.Join(dir, "s"), "--checkpoint", filepath.Join(dir, "c")},
	} {
		code, out, errOut := runCmd(t, args...)
		assert.Equal(t, exitFailure, code, "%v: output:\n%s%s", args, out, errOut)
		assert.Contains(t, errOut, "table typo does not exist", "%v", args)
	}
	assert.Equal(t, before, fileState(t, neko), "the file changed")
	assert.NoFileExists(t, filepath.Join(dir, "s"))
}

// On PostgreSQL too: stats and migrate --from of a table that does not exist
// fail naming it, and do not create it.
func TestMissingPostgresTable(t *testing.T) {
	raw := postgresURL(t) // a table of its own that nothing creates
	dir := t.TempDir()
	for _, args := range [][]string{
		{"stats", raw},
		{"migrate", "--from", raw, "--to", "memory:" + filepath.Join(dir, "s"), "--checkpoint", filepath.Join(dir, "c")},
	} {
		code, out, errOut := runCmd(t, args...)
		assert.Equal(t, exitFailure, code, "%v: output:\n%s%s", args, out, errOut)
		assert.Contains(t, errOut, "does not exist", "%v", args)
	}
	_, table, _ := strings.Cut(raw, "table=")
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, os.Getenv(dsnEnv))
	require.NoError(t, err)
	defer conn.Close(ctx)
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, table).Scan(&exists))
	assert.False(t, exists, "table %s was created", table)
}
