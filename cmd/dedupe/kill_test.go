package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/migrate"
)

// childEnv, set to "1" in a child's environment, makes this test binary run
// the command itself (see TestMain).
const childEnv = "DEDUPE_CMD_CHILD"

// TestMain runs the dedupe command when a test starts this test binary as a
// child with childEnv set: the kill test SIGKILLs the real command's code
// without building it with the go command, which would not see the module
// file an isolated build (GOWORK=off, -modfile) tests with.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// commandPath returns the program that runs the dedupe command: this test
// binary, with childEnv set in the environment of the children it starts.
func commandPath(t *testing.T) string {
	t.Helper()
	t.Setenv(childEnv, "1")
	bin, err := os.Executable()
	require.NoError(t, err)
	return bin
}

// readCheckpointFile returns the checkpoint the command wrote at path, if
// any yet.
func readCheckpointFile(path string) (migrate.Checkpoint, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return migrate.Checkpoint{}, false
	}
	var cf checkpointFile
	if json.Unmarshal(data, &cf) != nil {
		return migrate.Checkpoint{}, false
	}
	return cf.Checkpoint, true
}

// A migration killed with SIGKILL half way resumes from its checkpoint when
// run again: every mark arrives with its TTL, the summary counts every mark
// of the source once (the batch that was being written when the kill came
// counts as present), and the checkpoint is gone at the end.
func TestMigrateKilledResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("copies 200,000 marks twice")
	}
	bin := commandPath(t)
	const n, batch = 200_000, 1000
	f := writeNekoFile(t, n, 10)
	for _, c := range []struct {
		name, to   string
		maxPresent int64 // the batch re-written after the kill, at most
	}{
		{"postgres", postgresURL(t), batch},
		{"redis", redisURL(t), 3 * batch}, // a SCAN page may exceed the batch
	} {
		t.Run(c.name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "cp.json")
			args := []string{"migrate", "--from", f.url(), "--to", c.to, "--batch", "1000", "--checkpoint", cp}
			cmd := exec.Command(bin, args...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Start())
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			killedAt := waitAndKill(t, cmd, cp, n/3, exited)
			err := <-exited
			require.Error(t, err, "the first run was not killed\n%s", out.String())
			require.Equal(t, syscall.SIGKILL, cmd.ProcessState.Sys().(syscall.WaitStatus).Signal(), "the first run was not killed: %v\n%s", err, out.String())
			t.Logf("killed after %d marks committed", killedAt.Summary.Listed)

			start := time.Now()
			again := exec.Command(bin, args...)
			output, err := again.CombinedOutput()
			require.NoError(t, err, "the second run\n%s", output)
			t.Logf("the second run took %v", time.Since(start))
			assert.Contains(t, string(output), "resuming from "+cp, "the second run did not resume")
			sum := summaryOf(t, string(output))
			live := int64(len(f.live))
			assert.Equal(t, int64(n), sum.Listed, "summary %+v: listed", sum)
			assert.Equal(t, int64(f.expired), sum.Expired, "summary %+v: expired", sum)
			assert.Equal(t, live, sum.Copied+sum.Present, "summary %+v: copied or present", sum)
			assert.LessOrEqual(t, sum.Present, c.maxPresent, "summary %+v: present at most %d", sum, c.maxPresent)
			assert.Zero(t, sum.Invalid, "summary %+v: invalid", sum)
			_, err = os.Stat(cp)
			assert.ErrorIs(t, err, fs.ErrNotExist, "checkpoint left after the copy")
			checkCopied(t, open(t, c.to), f.live)
		})
	}
}

// waitAndKill kills cmd with SIGKILL once its checkpoint at path shows at
// least after marks committed, and returns that checkpoint. It fails t if
// the command ends first.
func waitAndKill(t *testing.T, cmd *exec.Cmd, path string, after int64, exited chan error) migrate.Checkpoint {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			require.Failf(t, "the first run ended before it was killed: make the source larger", "%v", err)
		case <-tick.C:
		}
		if cp, ok := readCheckpointFile(path); ok && cp.Summary.Listed >= after {
			require.False(t, cp.Done, "the first run finished before it was killed: make the source larger")
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			return cp
		}
	}
}
