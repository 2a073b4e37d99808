// Package killtest runs rounds of child processes, copies of the test binary
// running one test, and kills them with SIGKILL at random instants: the
// harness of the tests that show what a process death at any moment leaves
// behind.
package killtest

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// readyLine is what a child prints once it is about to start its work.
const readyLine = "killtest: ready"

// Config describes the rounds of a kill test.
type Config struct {
	// Test is the name of the test the children run (a test that does its
	// work only when Env is set, and calls Ready before it starts).
	Test string
	// Env is added to each child's environment.
	Env []string
	// Rounds is the number of rounds; Procs the children started at once in
	// each round (default 2).
	Rounds, Procs int
	// MaxDelay bounds the random time between a child's Ready and its kill.
	MaxDelay time.Duration
}

// Ready tells the parent that the child starts its work now: the kill comes
// at a random instant after it.
func Ready() { fmt.Println(readyLine) }

// Run runs cfg.Rounds rounds: each starts cfg.Procs children, waits until each
// is ready, and kills each with SIGKILL at a random instant within
// cfg.MaxDelay. The round passed to env is added to the children's
// environment as KILLTEST_ROUND.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.Procs <= 0 {
		cfg.Procs = 2
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for round := range cfg.Rounds {
		cmds := make([]*exec.Cmd, cfg.Procs)
		for i := range cmds {
			cmds[i] = start(t, exe, cfg, round)
		}
		for _, cmd := range cmds {
			time.Sleep(rand.N(cfg.MaxDelay + 1))
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
}

// Finish runs one child to the end, unkilled, and fails t if it fails.
func Finish(t *testing.T, cfg Config) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^"+cfg.Test+"$", "-test.count=1")
	cmd.Env = append(append(environ(), cfg.Env...), "KILLTEST_ROUND=finish")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("finishing child: %v\n%s", err, out)
	}
}

// start starts one child and waits until it is ready.
func start(t *testing.T, exe string, cfg Config, round int) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^"+cfg.Test+"$", "-test.count=1")
	cmd.Env = append(append(environ(), cfg.Env...), fmt.Sprintf("KILLTEST_ROUND=%d", round))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if strings.Contains(lines.Text(), readyLine) {
			go func() { // drain what the child prints until it dies
				for lines.Scan() {
				}
			}()
			return cmd
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	t.Fatalf("child of round %d ended before it was ready", round)
	return nil
}

// environ is the parent's environment for a child, less GOCOVERDIR: a child
// killed while it writes coverage data would leave a broken file.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOCOVERDIR=") {
			env = append(env, kv)
		}
	}
	return env
}
