package dedupe_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// These tests run the test binary again as child processes that share one
// database file with the parent: TestSQLiteChildProcess does the child's part
// when sqliteChildEnv names a mode, and nothing otherwise.
const (
	sqliteChildEnv = "DEDUPE_SQLITE_CHILD"
	sqlitePathEnv  = "DEDUPE_SQLITE_PATH"
	sqliteKeysEnv  = "DEDUPE_SQLITE_KEYS"
)

func TestSQLiteChildProcess(t *testing.T) {
	mode := os.Getenv(sqliteChildEnv)
	if mode == "" {
		t.Skip("the child side of the multi-process tests; runs only when re-executed by them")
	}
	path := os.Getenv(sqlitePathEnv)
	out := &lineWriter{w: os.Stdout}
	switch mode {
	case "race":
		childRace(t, path, out)
	case "mark":
		childMark(t, path, out)
	case "open":
		s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{BusyTimeout: time.Second})
		if err != nil {
			out.printf("error: %v", err)
			return
		}
		defer s.Close()
		if err := s.Mark(context.Background(), dedupe.Key{Channel: "child", MessageID: "1"}, 0); err != nil {
			out.printf("mark error: %v", err)
			return
		}
		out.printf("ok")
	default:
		require.Failf(t, "unknown child mode", "mode %q", mode)
	}
}

// lineWriter writes whole lines from many goroutines, each with one write
// call, so that a line is out of the process once printf returns.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) printf(format string, args ...any) {
	line := fmt.Sprintf(format, args...) + "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, line)
}

// childRace waits for "go" on stdin, then races 8 goroutines to Claim every
// key, printing each outcome. At the next "go" (every process has raced) it
// marks the even keys it claimed and releases the odd ones, and at the third
// it races to Claim every key again.
func childRace(t *testing.T, path string, out *lineWriter) {
	keys, err := strconv.Atoi(os.Getenv(sqliteKeysEnv))
	require.NoError(t, err)
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()
	in := bufio.NewScanner(os.Stdin)
	for phase := 1; phase <= 2; phase++ {
		out.printf("ready %d", phase)
		require.True(t, in.Scan(), "no go from the parent")
		var wg sync.WaitGroup
		var mu sync.Mutex
		var claimed []dedupe.Claim
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range keys {
					i := (i + g*keys/8) % keys
					k := dedupe.Key{Channel: "race", MessageID: strconv.Itoa(i)}
					c, cSt, err := claimNew(ctx, s, k, time.Hour)
					if err != nil {
						out.printf("error %d %d %v", phase, i, err)
						continue
					}
					out.printf("%s %d %d", cSt, phase, i)
					if cSt == dedupe.Claimed {
						mu.Lock()
						claimed = append(claimed, c)
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		if phase == 2 {
			break
		}
		// Mark and release only once every process has raced.
		out.printf("raced %d", phase)
		require.True(t, in.Scan(), "no go from the parent")
		for _, c := range claimed {
			i, _ := strconv.Atoi(c.Key.MessageID)
			if i%2 == 0 {
				err = s.Mark(ctx, c.Key, time.Hour)
			} else {
				err = s.Release(ctx, c)
			}
			if err != nil {
				out.printf("error %d %d %v", phase, i, err)
			}
		}
	}
	out.printf("done")
}

// childMark marks keys from 8 goroutines until it is killed, printing each
// key once its Mark has returned.
func childMark(t *testing.T, path string, out *lineWriter) {
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{Synchronous: "FULL"})
	require.NoError(t, err)
	ctx := context.Background()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 1_000_000; i++ {
				k := dedupe.Key{Channel: "kill", MessageID: fmt.Sprintf("%d-%d", g, i)}
				if err := s.Mark(ctx, k, 0); err != nil {
					out.printf("error %v", err)
					return
				}
				out.printf("marked %s", k)
			}
		}()
	}
	wg.Wait()
}

// childCmd returns a command running the test binary's child side in mode.
func childCmd(t *testing.T, exe, mode, path string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^TestSQLiteChildProcess$", "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOCOVERDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, sqliteChildEnv+"="+mode, sqlitePathEnv+"="+path)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

func testExecutable(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	return exe
}

// TestSQLiteMultiProcessClaim races four processes, eight goroutines each, on
// the same keys: exactly one Claimed per key across all of them, no error
// (no "database is locked"). Then, with the even keys marked and the odd ones
// released, they race again: every process sees the even keys as duplicates,
// and exactly one claims each odd key.
func TestSQLiteMultiProcessClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	const procs, keys = 4, 200
	path := filepath.Join(t.TempDir(), "shared.db")
	// The parent makes the file, so that children race on claims, not on its creation.
	s := openSQLite(t, path, dedupe.SQLiteConfig{})

	children := startRaceChildren(t, path, procs, keys)

	// counts[phase][status][key] over all processes.
	counts := [3]map[string][]int{nil, {}, {}}
	for _, barrier := range []string{"ready 1", "raced 1", "ready 2"} {
		for _, c := range children {
			waitLine(t, c.lines, barrier, counts)
		}
		for _, c := range children {
			_, err := io.WriteString(c.stdin, "go\n")
			require.NoError(t, err)
		}
	}
	for _, c := range children {
		waitLine(t, c.lines, "done", counts)
		require.NoError(t, c.cmd.Wait())
	}

	for i := range keys {
		claimed1 := counts[1]["claimed"][i]
		assert.Equal(t, 1, claimed1, "phase 1: key %d claimed %d times by %d processes", i, claimed1, procs)
		claimed2, dup2 := counts[2]["claimed"][i], counts[2]["duplicate"][i]
		if i%2 == 0 {
			assert.Equal(t, procs*8, dup2, "phase 2: marked key %d seen as a duplicate by every racer", i)
		} else {
			assert.Equal(t, 1, claimed2, "phase 2: released key %d claimed %d times", i, claimed2)
		}
	}
	for phase := 1; phase <= 2; phase++ {
		total := 0
		for _, per := range counts[phase] {
			for _, n := range per {
				total += n
			}
		}
		assert.Equal(t, procs*8*keys, total, "phase %d outcomes", phase)
	}
	// The parent's own store sees the children's marks.
	ok, err := s.Exists(context.Background(), dedupe.Key{Channel: "race", MessageID: "0"})
	require.NoError(t, err)
	assert.True(t, ok)
}

// raceChild is a child process of TestSQLiteMultiProcessClaim.
type raceChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its output
}

// startRaceChildren starts procs "race" children on path, each racing on keys.
func startRaceChildren(t *testing.T, path string, procs, keys int) []raceChild {
	t.Helper()
	exe := testExecutable(t)
	children := make([]raceChild, procs)
	for i := range children {
		cmd := childCmd(t, exe, "race", path, sqliteKeysEnv+"="+strconv.Itoa(keys))
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := make(chan string, 4*keys*8)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		children[i] = raceChild{cmd, stdin, lines}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	}
	return children
}

// waitLine reads a child's lines, counting "<status> <phase> <key>" outcomes,
// until want; an error line fails the test.
func waitLine(t *testing.T, lines <-chan string, want string, counts [3]map[string][]int) {
	t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "child exited before %q", want)
			if line == want {
				return
			}
			f := strings.Fields(line)
			require.NotEqual(t, "error", f[0], "child: %s", line)
			if len(f) == 3 {
				phase, _ := strconv.Atoi(f[1])
				key, _ := strconv.Atoi(f[2])
				if phase >= 1 && phase <= 2 {
					m := counts[phase]
					if m[f[0]] == nil {
						m[f[0]] = make([]int, 1000)
					}
					m[f[0]][key]++
				}
			}
		case <-timeout:
			require.Failf(t, "timed out", "no %q from a child in 2 minutes", want)
		}
	}
}

// TestSQLiteKillDurability kills a process with SIGKILL while it marks keys
// from eight goroutines, and finds every key it reported as marked.
func TestSQLiteKillDurability(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 test skipped in -short mode")
	}
	path := filepath.Join(t.TempDir(), "durable.db")
	cmd := childCmd(t, testExecutable(t), "mark", path)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	var reported []dedupe.Key
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		line := sc.Text()
		text, ok := strings.CutPrefix(line, "marked ")
		require.True(t, ok, "child: %s", line)
		k, err := dedupe.ParseKey(text)
		require.NoError(t, err)
		reported = append(reported, k)
		if len(reported) == 500 && !killed {
			require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
			killed = true
		}
	}
	require.NoError(t, sc.Err())
	err = cmd.Wait()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "killed")
	require.GreaterOrEqual(t, len(reported), 500)
	t.Logf("child reported %d marks before SIGKILL took it", len(reported))

	s := openSQLite(t, path, dedupe.SQLiteConfig{})
	for _, k := range reported {
		ok, err := s.Exists(context.Background(), k)
		require.NoError(t, err)
		require.True(t, ok, "%s was reported marked before the kill", k)
	}
	var check string
	require.NoError(t, rawDB(t, path).QueryRow("PRAGMA integrity_check").Scan(&check))
	assert.Equal(t, "ok", check)
}

// TestSQLiteReadOnly opens a database that the process may read but not
// write: the file is read-only, or its directory is (WAL mode and the journal
// need files beside the database). As root, which ignores permission bits, the
// open runs in a child process with the identity of the user nobody.
func TestSQLiteReadOnly(t *testing.T) {
	for _, tc := range []struct {
		name     string
		readOnly func(dir, file string) // makes dir or file read-only to the opener
	}{
		{"file", func(dir, file string) { _ = os.Chmod(file, 0o444) }},
		{"directory", func(dir, file string) { _ = os.Chmod(dir, 0o555) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			require.NoError(t, os.Mkdir(dir, 0o755))
			path := filepath.Join(dir, "d.db")
			s := openSQLite(t, path, dedupe.SQLiteConfig{})
			k := dedupe.Key{Channel: "ro", MessageID: "kept"}
			require.NoError(t, s.Mark(context.Background(), k, 0))
			require.NoError(t, s.Close())
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			tc.readOnly(dir, path)
			t.Cleanup(func() { _ = os.Chmod(dir, 0o755); _ = os.Chmod(path, 0o644) })
			var msg string
			if os.Geteuid() == 0 {
				msg = openAsNobody(t, dir, path, tc.name)
			} else {
				s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{BusyTimeout: time.Second})
				if err == nil {
					_ = s.Close()
					msg = "ok"
				} else {
					msg = "error: " + err.Error()
				}
			}
			t.Log(msg)
			require.True(t, strings.HasPrefix(msg, "error: dedupe: sqlite: open "+path+": "), msg)
			assert.Regexp(t, "read-only|cannot open the database file or its journal", msg)

			_ = os.Chmod(dir, 0o755)
			_ = os.Chmod(path, 0o644)
			after, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, before, after, "the refused open changed nothing")
			s = openSQLite(t, path, dedupe.SQLiteConfig{})
			ok, err := s.Exists(context.Background(), k)
			require.NoError(t, err)
			assert.True(t, ok)
		})
	}
}

// openAsNobody runs the "open" child as the user nobody on a copy of the test
// binary that nobody can execute. which is "file" (the database is read-only
// to nobody: it stays root's, in a directory nobody owns) or "directory" (the
// directory stays root's, the database is nobody's).
func openAsNobody(t *testing.T, dir, path, which string) string {
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Skipf("no user nobody to drop root's privileges to: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// Undo the chmod: ownership decides what nobody may write.
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(path, 0o644))
	if which == "file" {
		require.NoError(t, os.Chown(dir, uid, gid))
	} else {
		require.NoError(t, os.Chown(path, uid, gid))
	}
	for d := filepath.Dir(dir); d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			require.NoError(t, os.Chmod(d, fi.Mode().Perm()|0o111)) // traversable
		}
	}
	binDir := t.TempDir()
	require.NoError(t, os.Chmod(binDir, 0o755))
	require.NoError(t, os.Chmod(filepath.Dir(binDir), 0o755))
	exe := filepath.Join(binDir, "dedupe.test")
	src, err := os.Open(testExecutable(t))
	require.NoError(t, err)
	defer src.Close()
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_WRONLY, 0o755)
	require.NoError(t, err)
	_, err = io.Copy(dst, src)
	require.NoError(t, err)
	require.NoError(t, dst.Close())

	cmd := childCmd(t, exe, "open", path, "HOME=/", "TMPDIR="+binDir)
	cmd.Dir = binDir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("could not run the test binary as nobody (%v): %s", err, out)
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return first
}
