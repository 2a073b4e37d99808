package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
)

// The commands on a Redis store of the compact layout, whose URL does not
// say so: each reads the layout the prefix records, so "dedupe forget"
// finds and forgets a live mark (not "absent") and "dedupe stats" counts
// the marks (not WRONGTYPE). A URL whose layout= or shards= contradicts
// the record is refused, naming both layouts; one that agrees works.
func TestCompactRedisStore(t *testing.T) {
	ctx := context.Background()
	url := redisURL(t)
	gw, err := deduperedis.OpenURL(url, deduperedis.Config{Compact: true, Shards: 4096})
	require.NoError(t, err)
	t.Cleanup(func() { _ = gw.Close() })
	gone := dedupe.Key{Channel: "telegram", MessageID: "-100123:42"}
	kept := dedupe.Key{Channel: "telegram", MessageID: "-100123:43"}
	require.NoError(t, gw.Mark(ctx, gone, time.Hour))
	require.NoError(t, gw.MarkResult(ctx, kept, []byte("reply"), 2*time.Hour))
	_, err = gw.Claim(ctx, dedupe.NewClaim(dedupe.Key{Channel: "qq", MessageID: "7"}), time.Hour)
	require.NoError(t, err)

	code, out, errOut := runCmd(t, "stats", url)
	require.Equal(t, exitOK, code, "stats; output:\n%s%s", out, errOut)
	flat := strings.Join(strings.Fields(out), " ")
	assert.Contains(t, flat, "live marks: 2", "output:\n%s", out)
	assert.Contains(t, flat, "live claims: 1", "output:\n%s", out)

	code, out, errOut = runCmd(t, "forget", "-store", url, gone.String())
	require.Equal(t, exitOK, code, "forget; output:\n%s%s", out, errOut)
	assert.Contains(t, out, "forgotten "+gone.String()+"\n")
	marked, err := gw.Exists(ctx, gone)
	require.NoError(t, err)
	assert.False(t, marked, "the gateway's mark after dedupe forget")
	marked, err = gw.Exists(ctx, kept)
	require.NoError(t, err)
	assert.True(t, marked, "the other mark after dedupe forget")

	for _, q := range []string{"&layout=compact&shards=4096"} {
		code, out, errOut = runCmd(t, "forget", "-store", url+q, kept.String())
		require.Equal(t, exitOK, code, "forget %s; output:\n%s%s", q, out, errOut)
		assert.Contains(t, out, "forgotten "+kept.String()+"\n")
	}
	for _, tc := range []struct{ query, want string }{
		{"&layout=plain", "configured for the plain layout"},
		{"&layout=compact&shards=16384", "configured for the compact layout with 16384 shards"},
	} {
		for _, args := range [][]string{{"stats", url + tc.query}, {"forget", "-store", url + tc.query, gone.String()}} {
			code, out, errOut = runCmd(t, args...)
			assert.NotEqual(t, exitOK, code, "%v: output:\n%s%s", args, out, errOut)
			all := out + errOut
			assert.Contains(t, all, "layout mismatch", "%v", args)
			assert.Contains(t, all, "holds the compact layout with 4096 shards", "%v", args)
			assert.Contains(t, all, tc.want, "%v", args)
		}
	}
	code, out, errOut = runCmd(t, "stats", url+"&layout=sparse")
	assert.Equal(t, exitFailure, code, "output:\n%s%s", out, errOut)
	assert.Contains(t, out+errOut, "layout=sparse")
}
