package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/platform"
)

func defaultConfig(t *testing.T, args ...string) config {
	t.Helper()
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c, err := parseFlags(fs, args)
	require.NoError(t, err)
	return c
}

// TestDemo runs the demo: every platform, the rule-built source included,
// processed exactly the messages of its real delivery however often it came,
// and refused its forgery with 401 before the store (counted in the
// endpoint's Stats().Unauthenticated, and nowhere processed).
func TestDemo(t *testing.T) {
	var out bytes.Buffer
	results, err := playDemo(defaultConfig(t), &out)
	require.NoError(t, err)
	want := map[string]int{"line": 2, "meta": 2, "matrix": 2}
	var names []string
	for _, r := range results {
		names = append(names, r.source)
		w, ok := want[r.source]
		if !ok {
			w = 1
		}
		assert.Equal(t, w, r.want, r.source)
		assert.Equal(t, int64(w), r.processed, "%s: each real message processed once", r.source)
		assert.Greater(t, r.delivered, 1, "%s: redelivered", r.source)
		assert.Equal(t, 401, r.forgedStatus, r.source)
		assert.Equal(t, uint64(1), r.unauthenticated, r.source)
	}
	var presets []string
	for _, p := range platform.Presets() {
		presets = append(presets, p.Name)
	}
	assert.Equal(t, append(presets, "shopify"), names, "every preset, then the rule-built source")
	assert.Contains(t, out.String(), `meta: subscription check with verify token "demo-meta-verify-token" answered 200 "1158201444"`)
	assert.Contains(t, out.String(), `meta: subscription check with verify token "guessed" answered 403`)
	assert.Contains(t, out.String(), `dedupe_decisions_total{backend="memory",verdict="processed"} 20`)

	var again bytes.Buffer
	_, err = playDemo(defaultConfig(t), &again)
	require.NoError(t, err)
	assert.Equal(t, out.String(), again.String(), "the demo's output is deterministic")
}

// TestDemoSeeds runs the demo with secrets from the flags instead of the
// defaults.
func TestDemoSeeds(t *testing.T) {
	c := defaultConfig(t, "-telegram-secret", "t0ken", "-wecom-secret", "another-seed", "-rule-secret", "shpss_0123456789abcdef")
	require.NoError(t, demo(c, io.Discard))
}

// TestServeSources builds the sources -serve serves, with the secrets as
// they are given: every default is usable, and a WXBizMsgCrypt value that is
// not three values makes its endpoint refuse every delivery, which serve
// logs.
func TestServeSources(t *testing.T) {
	c := defaultConfig(t, "-serve", "-wecom-secret", "token-only")
	srcs, err := sources(c)
	require.NoError(t, err)
	refused := map[string]bool{}
	for _, p := range srcs {
		if err := p.CheckSecret(); err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			refused[p.Name] = true
		}
	}
	assert.Equal(t, map[string]bool{"wecom": true}, refused)
}

// TestRuleFile serves a source from a rule in a file, and refuses a rule
// that NewPreset finds invalid, a misspelt member, and -rule without -serve.
func TestRuleFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "billing.json")
	require.NoError(t, os.WriteFile(good, []byte(`{"name": "billing", "id": "/event/id", "ttl": "72h",
		"signature": {"header": "X-Billing-Signature", "encoding": "hex", "prefix": "v1="}}`), 0o600))
	srcs, err := sources(defaultConfig(t, "-serve", "-rule", good))
	require.NoError(t, err)
	last := srcs[len(srcs)-1]
	assert.Equal(t, "billing", last.Name)
	assert.NoError(t, last.CheckSecret())

	for name, rule := range map[string]string{
		"bad encoding": `{"name": "billing", "id": "/id", "signature": {"header": "X-Sig", "encoding": "base32"}}`,
		"misspelt":     `{"name": "billing", "id": "/id", "signatur": {"header": "X-Sig", "encoding": "hex"}}`,
	} {
		path := filepath.Join(dir, "bad.json")
		require.NoError(t, os.WriteFile(path, []byte(rule), 0o600))
		_, err := sources(defaultConfig(t, "-serve", "-rule", path))
		assert.Error(t, err, name)
	}
	_, err = sources(defaultConfig(t, "-serve", "-rule", filepath.Join(dir, "missing.json")))
	assert.True(t, errors.Is(err, os.ErrNotExist))

	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	_, err = parseFlags(fs, []string{"-rule", good})
	assert.Error(t, err, "-rule without -serve")
}
