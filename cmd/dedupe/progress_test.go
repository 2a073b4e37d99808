package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/migrate"
)

// The bar is drawn only on a character device: not into a buffer or a pipe,
// where the summary lines alone are written.
func TestProgressOnlyOnATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if isTerminal(w) || isTerminal(&bytes.Buffer{}) {
		t.Fatal("a pipe or a buffer taken for a terminal")
	}
	var buf bytes.Buffer
	p := &progress{w: &buf, total: 1000, started: time.Now().Add(-time.Second)}
	p.update(migrate.Summary{Listed: 500})
	p.update(migrate.Summary{Listed: 600}) // within barEvery of the last: not drawn
	p.finish()
	out := buf.String()
	if !strings.HasPrefix(out, "\r[###############...............]  50.0% 500/1000 marks") || strings.Contains(out, "600") || !strings.HasSuffix(out, "\n") {
		t.Fatalf("bar %q", out)
	}
}
