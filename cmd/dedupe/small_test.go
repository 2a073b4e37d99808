package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/migrate"
)

// The total of the bar counts the source's live marks, but a copy lists the
// expired ones too: past the total, the bar gives way to the count and never
// shows more than 100%.
func TestProgressNeverPassesTotal(t *testing.T) {
	var buf bytes.Buffer
	p := &progress{w: &buf, total: 190000, started: time.Now().Add(-time.Second)}
	p.update(migrate.Summary{Listed: 195000})
	out := buf.String()
	assert.NotContains(t, out, "195000/190000")
	assert.NotContains(t, out, "%")
	assert.Contains(t, out, "195000 marks")
}

// "dedupe migrate -h" and "dedupe stats -h" print the usage to standard
// output and exit 0, with no error line.
func TestHelpExitsCleanly(t *testing.T) {
	for _, args := range [][]string{{"migrate", "-h"}, {"migrate", "--help"}, {"stats", "-h"}} {
		code, out, errOut := runCmd(t, args...)
		assert.Equal(t, exitOK, code, "%v", args)
		assert.Contains(t, out, "usage:", "%v", args)
		assert.Empty(t, errOut, "%v", args)
		assert.NotContains(t, out+errOut, "help requested", "%v", args)
	}
	_, out, _ := runCmd(t, "migrate", "-h")
	assert.Contains(t, out, "-no-expiry-ttl", "the options are listed")
}

// A negative --no-expiry-ttl is refused as a usage error, not taken for the
// 24 h default.
func TestNegativeNoExpiryTTL(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCmd(t, "migrate", "--from", "sqlite:"+filepath.Join(dir, "a.db"), "--to", "memory:"+filepath.Join(dir, "b"),
		"--no-expiry-ttl", "-1h")
	assert.Equal(t, exitUsage, code, "output:\n%s%s", out, errOut)
	assert.Contains(t, errOut, "--no-expiry-ttl -1h0m0s is negative")
}

// A temporary checkpoint left by a kill inside its write is removed by the
// next run; other files beside it are left alone.
func TestStaleCheckpointTempRemoved(t *testing.T) {
	dir := t.TempDir()
	cp := filepath.Join(dir, "cp.json")
	stale := cp + ".4012345.tmp"
	others := []string{filepath.Join(dir, "cp.jsonx.1.tmp"), filepath.Join(dir, "other.tmp"), cp + ".tmp.keep"}
	for _, name := range append([]string{stale}, others...) {
		require.NoError(t, os.WriteFile(name, []byte(`{"run":`), 0o600))
	}
	src := writeNekoFile(t, 20, 0)
	code, out, errOut := runCmd(t, "migrate", "--from", src.url(), "--to", "memory:"+filepath.Join(dir, "snap"), "--checkpoint", cp)
	require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
	assert.NoFileExists(t, stale)
	for _, name := range others {
		assert.FileExists(t, name)
	}
}
