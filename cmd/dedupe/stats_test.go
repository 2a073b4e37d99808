package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// "dedupe stats" on each kind of store counts its live marks and claims,
// and gives their earliest and latest expiry and, for the SQL stores, sizes.
func TestStatsEachStore(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "marks.snapshot")
	for _, c := range []struct {
		name, url string
		claims    string // what the claims line says
		sizes     []string
	}{
		{"sqlite", "sqlite:" + filepath.Join(t.TempDir(), "gateway.db"), "1", []string{"size file:", "size gateway_dedupe:"}},
		{"memory", "memory:" + snap, "0", nil}, // a snapshot holds no claims
		{"redis", redisURL(t), "1", nil},
		{"postgres", postgresURL(t), "1", []string{"size migrate_test_"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := openStore(ctx, c.url, dest)
			require.NoError(t, err, "open")
			before := time.Now()
			for i, ttl := range []time.Duration{time.Hour, 3 * time.Hour, 2 * time.Hour} {
				require.NoError(t, s.Mark(ctx, dedupe.Key{Channel: "qq", MessageID: string(rune('a' + i))}, ttl), "mark")
			}
			after := time.Now()
			_, err = s.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "qq", MessageID: "z"}), time.Hour)
			require.NoError(t, err, "claim")
			require.NoError(t, s.close(), "close")

			code, out, errOut := runCmd(t, "stats", c.url)
			require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
			flat := strings.Join(strings.Fields(out), " ")
			for _, want := range append([]string{"backend: " + c.name, "live marks: 3", "live claims: " + c.claims,
				"oldest expiry:", "newest expiry:"}, c.sizes...) {
				assert.Contains(t, flat, want, "output:\n%s", out)
			}
			// The expiries are the marks' own (printed to the second), however long the command took.
			for _, e := range []struct {
				line string
				ttl  time.Duration
			}{{"oldest expiry:", time.Hour}, {"newest expiry:", 3 * time.Hour}} {
				_, rest, _ := strings.Cut(flat, e.line+" ")
				got, err := time.Parse(time.RFC3339, strings.Fields(rest + " x")[0])
				assert.NoError(t, err, e.line)
				assert.WithinRange(t, got, before.Add(e.ttl).Truncate(time.Second), after.Add(e.ttl), e.line)
			}
		})
	}
}
