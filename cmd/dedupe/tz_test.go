package main

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A NekoBot file written by a process 8 h east of the local zone, read
// without ?tz=, reads as created 8 h in the future: stats and migrate warn
// on standard error and suggest ?tz=. The same file read in its zone, and a
// file in the local zone, give no warning.
func TestNekoBotFileInAnotherZoneWarns(t *testing.T) {
	f := writeNekoFile(t, 100, 0)
	db, err := sql.Open("sqlite", "file:"+f.path)
	require.NoError(t, err)
	east := time.Now().In(time.Local).Add(8 * time.Hour) // naive wall time 8 h east
	_, err = db.Exec(`UPDATE gateway_dedupe SET created_at = ?`, pyISO(east))
	require.NoError(t, err)
	require.NoError(t, db.Close())

	dir := t.TempDir()
	plain := "sqlite:" + f.path
	for _, args := range [][]string{
		{"stats", plain},
		{"migrate", "--dry-run", "--from", plain, "--to", "memory:" + filepath.Join(dir, "none")},
	} {
		code, out, errOut := runCmd(t, args...)
		require.Equal(t, exitOK, code, "%v: output:\n%s%s", args, out, errOut)
		assert.Contains(t, errOut, "created in the future", "%v", args)
		assert.Contains(t, errOut, "?tz=", "%v", args)
		assert.Contains(t, errOut, "ahead=8h0m0s", "%v", args)
	}

	_, offset := time.Now().Zone()
	eastZone := "Etc/GMT-8" // IANA's signs are inverted: 8 h east of UTC
	if offset == 0 {
		code, out, errOut := runCmd(t, "stats", plain+"?tz="+eastZone)
		require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
		assert.Empty(t, errOut, "read in its own zone")
	}
	local := writeNekoFile(t, 100, 0) // naive UTC, read as UTC
	code, out, errOut := runCmd(t, "stats", local.url())
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	assert.Empty(t, errOut)
}
