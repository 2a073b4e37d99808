package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
			mustf(t, err, "open")
			before := time.Now()
			for i, ttl := range []time.Duration{time.Hour, 3 * time.Hour, 2 * time.Hour} {
				mustf(t, s.Mark(ctx, dedupe.Key{Channel: "qq", MessageID: string(rune('a' + i))}, ttl), "mark")
			}
			after := time.Now()
			_, err = s.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "qq", MessageID: "z"}), time.Hour)
			mustf(t, err, "claim")
			mustf(t, s.close(), "close")

			code, out, errOut := runCmd(t, "stats", c.url)
			if code != exitOK {
				t.Fatalf("exit %d: %s%s", code, out, errOut)
			}
			flat := strings.Join(strings.Fields(out), " ")
			for _, want := range append([]string{"backend: " + c.name, "live marks: 3", "live claims: " + c.claims,
				"oldest expiry:", "newest expiry:"}, c.sizes...) {
				if !strings.Contains(flat, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			// The expiries are the marks' own (printed to the second), however long the command took.
			for _, e := range []struct {
				line string
				ttl  time.Duration
			}{{"oldest expiry:", time.Hour}, {"newest expiry:", 3 * time.Hour}} {
				_, rest, _ := strings.Cut(flat, e.line+" ")
				got, err := time.Parse(time.RFC3339, strings.Fields(rest + " x")[0])
				if err != nil || got.Before(before.Add(e.ttl).Truncate(time.Second)) || got.After(after.Add(e.ttl)) {
					t.Errorf("%s %v (%v), want between %v and %v", e.line, got, err, before.Add(e.ttl), after.Add(e.ttl))
				}
			}
		})
	}
}
