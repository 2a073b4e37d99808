package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/postgres"
)

// libraryOpen opens a store URL of the dedupe command with the library's own
// function for it, deduperedis.OpenURL or postgres.Open, given no Config.
func libraryOpen(t *testing.T, raw string) dedupe.Store {
	t.Helper()
	var s interface {
		dedupe.Store
		Close() error
	}
	var err error
	if strings.HasPrefix(raw, "redis") {
		s, err = deduperedis.OpenURL(raw, deduperedis.Config{})
	} else {
		s, err = postgres.Open(context.Background(), raw, postgres.Config{})
	}
	require.NoError(t, err, "the library refuses the command's URL")
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// One URL grammar (docs/urls.md): what the command writes to a Redis or
// PostgreSQL URL, the library's OpenURL or Open of the same URL reads, and
// what the library writes there, "dedupe stats" counts.
func TestURLsAreTheLibrarys(t *testing.T) {
	for _, c := range []struct {
		name string
		url  func(testing.TB) string
	}{{"redis", redisURL}, {"postgres", postgresURL}} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			raw := c.url(t)
			src := writeNekoFile(t, 50, 0)
			code, out, errOut := runCmd(t, "migrate", "--from", src.url(), "--to", raw,
				"--checkpoint", filepath.Join(t.TempDir(), "cp"))
			require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)

			lib := libraryOpen(t, raw) // command to library
			checkCopied(t, lib, src.live)
			for i := range 7 { // library to command
				require.NoError(t, lib.Mark(ctx, dedupe.Key{Channel: "lib", MessageID: string(rune('a' + i))}, time.Hour))
			}
			code, out, errOut = runCmd(t, "stats", raw)
			require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
			assert.Contains(t, strings.Join(strings.Fields(out), " "), "live marks: 57", "output:\n%s", out)
		})
	}
}

// A table made with the partitioned layout opens in every command without
// the URL saying so (the command reads the layout), and with the URL saying
// so (partitioned=true).
func TestPartitionedPostgresTable(t *testing.T) {
	raw := postgresURL(t)
	_, table, _ := strings.Cut(raw, "table=")
	t.Cleanup(func() {
		ctx := context.Background()
		if conn, err := pgx.Connect(ctx, strings.Split(raw, "&table=")[0]); err == nil {
			_, _ = conn.Exec(ctx, `DROP FUNCTION IF EXISTS `+table+`_add_partitions(timestamptz)`)
			_ = conn.Close(ctx)
		}
	})
	made, err := postgres.Open(context.Background(), strings.Split(raw, "&table=")[0],
		postgres.Config{Table: table, Partitioned: true, PartitionSpan: 2 * time.Hour})
	require.NoError(t, err)
	require.NoError(t, made.Close())
	src := writeNekoFile(t, 300, 10)
	dir := t.TempDir()
	for i, to := range []string{raw, raw + "&partitioned=true&partition_span=2h"} {
		code, out, errOut := runCmd(t, "migrate", "--from", src.url(), "--to", to, "--checkpoint", filepath.Join(dir, "cp"))
		require.Equal(t, exitOK, code, "migrate --to %s: output:\n%s%s", to, out, errOut)
		if i == 0 {
			assert.Equal(t, int64(len(src.live)), summaryOf(t, out).Copied)
		}
		code, out, errOut = runCmd(t, "stats", to)
		require.Equal(t, exitOK, code, "stats %s: output:\n%s%s", to, out, errOut)
		assert.Contains(t, strings.Join(strings.Fields(out), " "), "live marks: 270", "output:\n%s", out)
		code, out, errOut = runCmd(t, "migrate", "--dry-run", "--from", to, "--to", "memory:"+filepath.Join(dir, "none"))
		require.Equal(t, exitOK, code, "migrate --from %s: output:\n%s%s", to, out, errOut)
		assert.Equal(t, int64(270), summaryOf(t, out).Copied)
	}
}
