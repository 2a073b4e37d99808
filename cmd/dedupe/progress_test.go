package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/migrate"
)

// The bar is drawn only on a character device: not into a buffer or a pipe,
// where the summary lines alone are written.
func TestProgressOnlyOnATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, isTerminal(w), "a pipe taken for a terminal")
	require.False(t, isTerminal(&bytes.Buffer{}), "a buffer taken for a terminal")
	var buf bytes.Buffer
	p := &progress{w: &buf, total: 1000, started: time.Now().Add(-time.Second)}
	p.update(migrate.Summary{Listed: 500})
	p.update(migrate.Summary{Listed: 600}) // within barEvery of the last: not drawn
	p.finish()
	out := buf.String()
	require.True(t, strings.HasPrefix(out, "\r[###############...............]  50.0% 500/1000 marks"), "bar %q", out)
	require.NotContains(t, out, "600", "bar %q", out)
	require.True(t, strings.HasSuffix(out, "\n"), "bar %q", out)
}
