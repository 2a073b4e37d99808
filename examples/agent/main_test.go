package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runDemo runs the demo on store and returns its exit status and output.
func runDemo(t *testing.T, store string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	var out, errs bytes.Buffer
	code := mainArgs(ctx, []string{"-store", store, "-llm-delay", "20ms"}, &out, &errs)
	t.Logf("stdout:\n%sstderr:\n%s", out.String(), errs.String())
	if code == 2 && strings.Contains(errs.String(), "keeps no results") {
		t.Skipf("the %s store of this build keeps no results yet", store)
	}
	return code, out.String()
}

// TestAgentSQLite: on a SQLite file, every retry (after the reply, concurrent
// and waiting, after a restart) gets the first reply, and the model is
// called once per key.
func TestAgentSQLite(t *testing.T) {
	code, out := runDemo(t, "sqlite:"+filepath.Join(t.TempDir(), "agent.db"))
	expect(t, code, out, "4. after a restart:   201 replayed=true, same reply: true; model calls: 2")
}

// TestAgentMemory: on memory the restart is skipped, the rest holds.
func TestAgentMemory(t *testing.T) {
	code, out := runDemo(t, "memory")
	expect(t, code, out, "after waiting (1 wait), same reply: true; model calls: 2", "4. restart:           skipped")
}

// TestAgentServers: on Redis and PostgreSQL, when the servers are given
// (DEDUPE_REDIS_ADDR, DEDUPE_POSTGRES_DSN) and their stores keep results.
func TestAgentServers(t *testing.T) {
	for env, store := range map[string]func(string) string{
		"DEDUPE_REDIS_ADDR":   func(v string) string { return "redis://" + v + "/0" },
		"DEDUPE_POSTGRES_DSN": func(v string) string { return v },
	} {
		t.Run(env, func(t *testing.T) {
			v := os.Getenv(env)
			if v == "" {
				if os.Getenv("DEDUPE_REQUIRE_SERVERS") != "" {
					require.Failf(t, "server not configured", "%s is unset", env)
				}
				t.Skipf("%s is unset", env)
			}
			code, out := runDemo(t, store(v))
			expect(t, code, out, "4. after a restart:   201 replayed=true, same reply: true; model calls: 2")
		})
	}
}

// TestAgentBadStore: a store that cannot be opened is a setup error, status 2.
func TestAgentBadStore(t *testing.T) {
	var out, errs bytes.Buffer
	code := mainArgs(t.Context(), []string{"-store", "nonsense"}, &out, &errs)
	assert.Equal(t, 2, code, "stderr %q", errs.String())
	assert.Contains(t, errs.String(), "-store", "stderr")
}

// expect checks that the demo exited 0 and printed each of lines.
func expect(t *testing.T, code int, out string, lines ...string) {
	t.Helper()
	assert.Equal(t, 0, code, "exit status")
	for _, l := range lines {
		assert.Contains(t, out, l, "output lacks %q", l)
	}
	assert.Contains(t, out, "ok: every retry got the first reply", "output lacks the final ok")
}

// TestRepliesDemo: the replies demo on each platform's semantics and policy:
// exit 0, each reply once on LINE, Discord and Feishu, Telegram's reported
// as its policy says.
func TestRepliesDemo(t *testing.T) {
	cases := []struct {
		platform, policy string
		lines            []string
	}{
		{"line", "", []string{"replies on the platform: 1; model calls: 1; reported possibly lost: false, possibly duplicated: false"}},
		{"discord", "", []string{"replies on the platform: 1; model calls: 1; reported possibly lost: false, possibly duplicated: false"}},
		{"feishu", "", []string{"replies on the platform: 1; model calls: 1; reported possibly lost: false, possibly duplicated: false"}},
		{"telegram", "", []string{"replies on the platform: 0; model calls: 1; reported possibly lost: true"}},
		{"telegram", "at-least-once", []string{"replies on the platform: 2; model calls: 1; reported possibly lost: false, possibly duplicated: true"}},
	}
	for _, c := range cases {
		t.Run(c.platform+"/"+c.policy, func(t *testing.T) {
			var out, errs bytes.Buffer
			args := []string{"-platform", c.platform, "-policy", c.policy, "-llm-delay", "1ms",
				"-store", "sqlite:" + filepath.Join(t.TempDir(), "agent.db")}
			code := mainArgs(t.Context(), args, &out, &errs)
			t.Logf("stdout:\n%sstderr:\n%s", out.String(), errs.String())
			assert.Equal(t, 0, code, "exit status")
			for _, l := range c.lines {
				assert.Contains(t, out.String(), l)
			}
			if c.policy == "" && c.platform != "telegram" {
				assert.Equal(t, 5, strings.Count(out.String(), "replies on the platform: 1;"), "every reply once")
			}
			assert.Contains(t, out.String(), "redelivery: done, found sent: true", "the reply sent before the gateway died is not sent again")
			assert.Contains(t, out.String(), "ok: every reply is on the platform once")
		})
	}
}

// TestRepliesDemoBadFlags: an unknown platform or policy is a setup error.
func TestRepliesDemoBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-platform", "irc"}, {"-platform", "line", "-policy", "twice"}} {
		var out, errs bytes.Buffer
		assert.Equal(t, 2, mainArgs(t.Context(), append(args, "-store", "memory"), &out, &errs), "%v: %s", args, errs.String())
	}
}
