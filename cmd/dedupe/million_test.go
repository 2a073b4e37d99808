package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/migrate"
)

// millionEnv names the environment variable that, set to 1, runs the test of
// a million marks: a few minutes on a loaded machine.
const millionEnv = "DEDUPE_MIGRATE_1M"

// A NekoBot file of a million marks (one in twenty expired) migrates to
// PostgreSQL and to Redis with nothing lost: every live mark exists at each
// destination with its expiry within a second of the file's.
func TestMigrateMillionNekoBotMarks(t *testing.T) {
	if testing.Short() || os.Getenv(millionEnv) != "1" {
		t.Skip("set " + millionEnv + "=1 (without -short) to migrate a million marks")
	}
	const n = 1_000_000
	start := time.Now()
	f := writeNekoFile(t, n, 20)
	t.Logf("wrote a NekoBot file of %d marks (%d expired) in %v", n, f.expired, time.Since(start))
	for _, c := range []struct{ name, to string }{{"postgres", postgresURL(t)}, {"redis", redisURL(t)}} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			code, out, errOut := runCmd(t, "migrate", "--from", f.url(), "--to", c.to, "--checkpoint", filepath.Join(t.TempDir(), "cp.json"))
			took := time.Since(start)
			require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
			want := migrate.Summary{Listed: n, Copied: int64(len(f.live)), Expired: int64(f.expired)}
			require.Equal(t, want, summaryOf(t, out))
			t.Logf("migrated %d marks in %v (%.0f marks/s)", n, took, n/took.Seconds())
			start = time.Now()
			checkCopied(t, open(t, c.to), f.live)
			t.Logf("checked every mark in %v", time.Since(start))
		})
	}
}
