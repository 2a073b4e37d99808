package dedupe_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

func TestMemorySnapshotRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "marks.snap")
	cfg := dedupe.MemoryConfig{SnapshotPath: path}
	st, err := dedupe.OpenMemoryStore(cfg)
	require.NoError(t, err, "no file yet: an empty store")
	for i := range 100 {
		require.NoError(t, st.Mark(ctx, key(i), time.Hour))
	}
	require.NoError(t, st.Mark(ctx, key(100), time.Millisecond)) // expires before the restart
	c, status, err := claimNew(ctx, st, key(101), time.Hour)     // in flight when the process stops
	require.NoError(t, err)
	require.Equal(t, dedupe.Claimed, status)
	require.NoError(t, st.Close(), "Close writes the snapshot")
	time.Sleep(2 * time.Millisecond)

	st, err = dedupe.OpenMemoryStore(cfg)
	require.NoError(t, err)
	defer st.Close()
	for i := range 100 {
		assert.True(t, exists(t, st, key(i)), "key %d survived the restart", i)
	}
	assert.False(t, exists(t, st, key(100)), "an expired mark is not loaded")
	_, status, err = claimNew(ctx, st, c.Key, time.Hour)
	require.NoError(t, err)
	assert.Equal(t, dedupe.Claimed, status, "claims are not snapshotted")
}

// A mark keeps its expiry across a restart: it is not given a new TTL.
func TestMemorySnapshotKeepsExpiry(t *testing.T) {
	ctx := context.Background()
	clock := dedupetest.NewClock(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	cfg := dedupe.MemoryConfig{SnapshotPath: filepath.Join(t.TempDir(), "marks.snap"), Now: clock.Now}
	st, err := dedupe.OpenMemoryStore(cfg)
	require.NoError(t, err)
	require.NoError(t, st.Mark(ctx, key1, 10*time.Minute))
	require.NoError(t, st.Close())
	clock.Advance(6 * time.Minute) // the restart takes a while
	st, err = dedupe.OpenMemoryStore(cfg)
	require.NoError(t, err)
	defer st.Close()
	assert.True(t, exists(t, st, key1))
	clock.Advance(5 * time.Minute)
	assert.False(t, exists(t, st, key1), "expired at its first expiry, not 10 minutes after the restart")
}

// A corrupt, truncated or foreign file is refused whole: the store starts
// empty, says why, and replaces the file at its next snapshot.
func TestMemorySnapshotRefused(t *testing.T) {
	ctx := context.Background()
	good := filepath.Join(t.TempDir(), "good.snap")
	st, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: good})
	require.NoError(t, err)
	for i := range 50 {
		require.NoError(t, st.Mark(ctx, key(i), time.Hour))
	}
	require.NoError(t, st.Close())
	data, err := os.ReadFile(good)
	require.NoError(t, err)

	flipped := append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 0x40
	for name, content := range map[string][]byte{
		"corrupt":   flipped,
		"truncated": data[:len(data)*2/3],
		"empty":     {},
		"foreign":   []byte("SQLite format 3\x00 not a snapshot at all"),
		"json":      []byte(`{"telegram:1": "2026-11-30T00:00:00Z"}`),
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), name+".snap")
			require.NoError(t, os.WriteFile(path, content, 0o600))
			st, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path})
			require.Error(t, err)
			assert.Contains(t, err.Error(), "refused, starting empty")
			require.NotNil(t, st, "a usable store all the same")
			assert.Zero(t, st.Len(), "never half loaded")
			require.NoError(t, st.Mark(ctx, key(7), time.Hour))
			require.NoError(t, st.Close())
			st, err = dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path})
			require.NoError(t, err, "the next snapshot replaced the refused file")
			assert.Equal(t, 1, st.Len())
			require.NoError(t, st.Close())
		})
	}
}

func TestMemorySnapshotInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "marks.snap")
		st, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path, SnapshotInterval: time.Minute})
		require.NoError(t, err)
		require.NoError(t, st.Mark(context.Background(), key1, time.Hour))
		_, err = os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist, "nothing written before the interval")
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		copyOf, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path})
		require.NoError(t, err)
		assert.True(t, exists(t, copyOf, key1), "written at the interval")
		require.NoError(t, st.Close())
		require.NoError(t, copyOf.Close())
	})
}

// A process killed with SIGKILL while it writes snapshots leaves the last
// whole one, never a torn file, and the temporary file it was writing is
// removed by the next OpenMemoryStore. Five children are killed in turn, each
// after 200 snapshots, once the temporary file of the next one is seen.
func TestMemorySnapshotKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "marks.snap")
	const kills = 5
	left := 0 // temporary files left by the kills
	for range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMemorySnapshotChild$")
		cmd.Env = append(os.Environ(), "DEDUPE_SNAPSHOT_CHILD="+path)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := bufio.NewScanner(out)
		snapshots := 0
		for lines.Scan() && snapshots < 200 { // the child prints a line a snapshot
			snapshots++
		}
		for range 100000 { // the child spends most of its time writing
			if len(tempSnapshots(t, dir)) > 0 {
				break
			}
		}
		require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
		_ = cmd.Wait()
		require.Equal(t, 200, snapshots, "the child ran")
		left += len(tempSnapshots(t, dir))
	}
	t.Logf("%d kills left %d temporary files behind", kills, left)

	st, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path})
	require.NoError(t, err, "a whole snapshot survived the kills")
	defer st.Close()
	assert.Empty(t, tempSnapshots(t, dir), "no temporary file is left once a store is opened")
	n := st.Len()
	assert.Positive(t, n)
	for i := range n { // each snapshot holds a prefix of the keys marked
		require.True(t, exists(t, st, key(i)), "key %d of a snapshot of %d", i, n)
	}
	assert.GreaterOrEqual(t, n, 2000)
	t.Logf("the last whole snapshot held %d marks", n)
}

// tempSnapshots returns the temporary snapshot files in dir.
func tempSnapshots(t *testing.T, dir string) []string {
	names, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	require.NoError(t, err)
	return names
}

// TestMemorySnapshotChild is the child of TestMemorySnapshotKilled: it marks
// keys and writes a snapshot after every ten, until it is killed.
func TestMemorySnapshotChild(t *testing.T) {
	path := os.Getenv("DEDUPE_SNAPSHOT_CHILD")
	if path == "" {
		t.Skip("the child of TestMemorySnapshotKilled; runs only when re-executed by it")
	}
	st, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path, MaxSize: 1 << 20})
	require.NoError(t, err)
	for i := 0; ; i++ {
		require.NoError(t, st.Mark(context.Background(), key(i), time.Hour))
		if i%10 == 9 {
			require.NoError(t, st.SaveSnapshot())
			fmt.Println(strconv.Itoa(i))
		}
	}
}

// A file at the snapshot path that cannot be read is an error from
// OpenMemoryStore and no store, and it is left as it was: a FIFO does not
// hang the opening, a link to /dev/zero is not read, an unreadable snapshot is
// not overwritten. A file larger than any snapshot of MaxSize marks is refused
// without being read. Each case opens the store in a child process with a
// bounded address space, so that an opening that hangs or reads without end
// fails the test instead of the machine.
func TestMemorySnapshotUnreadable(t *testing.T) {
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "marks.snap")

	t.Run("fifo", func(t *testing.T) {
		require.NoError(t, syscall.Mkfifo(path, 0o600))
		defer os.Remove(path)
		res := openInChild(t, path, false)
		assert.Equal(t, "store=false", res.store, "no store: %s", res)
		assert.Contains(t, res.err, "not a regular file")
	})
	t.Run("dev-zero", func(t *testing.T) {
		require.NoError(t, os.Symlink("/dev/zero", path))
		defer os.Remove(path)
		res := openInChild(t, path, false)
		assert.Equal(t, "store=false", res.store, "no store: %s", res)
		assert.Contains(t, res.err, "not a regular file")
	})
	t.Run("1GiB", func(t *testing.T) {
		f, err := os.Create(path)
		require.NoError(t, err)
		require.NoError(t, f.Truncate(1<<30)) // sparse: takes no disk
		require.NoError(t, f.Close())
		defer os.Remove(path)
		res := openInChild(t, path, false)
		assert.Equal(t, "store=true", res.store, "refused, starting empty: %s", res)
		assert.Contains(t, res.err, "refused, starting empty")
		// Reading the file would take over 1 GiB; the race detector alone
		// makes a child's RSS reach some 460 MiB.
		assert.Less(t, res.maxRSS, int64(900<<20), "the file was not read")
	})
	t.Run("no-permission", func(t *testing.T) {
		st, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path})
		require.NoError(t, err)
		for i := range 1000 {
			require.NoError(t, st.Mark(context.Background(), key(i), time.Hour))
		}
		require.NoError(t, st.Close())
		require.NoError(t, os.Chmod(path, 0))
		// As root, the child drops to nobody, who needs to reach the directory.
		require.NoError(t, os.Chmod(filepath.Dir(dir), 0o755))
		require.NoError(t, os.Chmod(dir, 0o777))
		res := openInChild(t, path, os.Geteuid() == 0)
		assert.Equal(t, "store=false", res.store, "no store: %s", res)
		assert.Contains(t, res.err, "permission denied")

		require.NoError(t, os.Chmod(path, 0o600))
		st, err = dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path})
		require.NoError(t, err)
		defer st.Close()
		kept := 0
		for i := range 1000 {
			if exists(t, st, key(i)) {
				kept++
			}
		}
		assert.Equal(t, 1000, kept, "marks kept of 1000: the snapshot was not overwritten")
	})
}

// childOpen is what the child of openInChild saw.
type childOpen struct {
	store, err string
	maxRSS     int64 // bytes
	exit       error
}

func (c childOpen) String() string {
	return fmt.Sprintf("%s %s (max RSS %d MiB, exit %v)", c.store, c.err, c.maxRSS>>20, c.exit)
}

// openInChild opens a memory store at path in a child process
// (TestMemorySnapshotOpenChild), as user nobody if asNobody, killing it after
// a minute.
func openInChild(t *testing.T, path string, asNobody bool) childOpen {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestMemorySnapshotOpenChild$")
	cmd.Env = append(os.Environ(), "DEDUPE_SNAPSHOT_OPEN="+path)
	if asNobody {
		cmd.Env = append(cmd.Env, "DEDUPE_SNAPSHOT_NOBODY=1")
	}
	out, err := cmd.Output()
	res := childOpen{store: "store=?", exit: err}
	for line := range strings.Lines(string(out)) {
		if s, e, ok := strings.Cut(strings.TrimSpace(line), " err="); ok && strings.HasPrefix(s, "store=") {
			res.store, res.err = s, e
		}
	}
	if cmd.ProcessState != nil {
		res.maxRSS = cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss << 10
	}
	require.NoError(t, ctx.Err(), "the child hung: %s", res)
	t.Logf("child: %s", res)
	return res
}

// TestMemorySnapshotOpenChild is the child of openInChild: it opens a store at
// the path it is given with at most 1 GiB more address space than it has, and
// closes it (writing a snapshot) if it got one.
func TestMemorySnapshotOpenChild(t *testing.T) {
	path := os.Getenv("DEDUPE_SNAPSHOT_OPEN")
	if path == "" {
		t.Skip("the child of openInChild; runs only when re-executed by it")
	}
	limitAddressSpace(t, 1<<30)
	if os.Getenv("DEDUPE_SNAPSHOT_NOBODY") != "" {
		require.NoError(t, syscall.Setgid(65534))
		require.NoError(t, syscall.Setuid(65534))
	}
	st, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path})
	fmt.Printf("store=%t err=%v\n", st != nil, err)
	if st != nil {
		_ = st.Close()
	}
}

// limitAddressSpace lets the process map at most extra bytes beyond what it
// has mapped already.
func limitAddressSpace(t *testing.T, extra uint64) {
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	var kB uint64
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "VmSize:"); ok {
			kB, err = strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
		}
	}
	require.Positive(t, kB)
	lim := kB<<10 + extra
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: lim, Max: lim}))
}

// Only the temporary files of the store's own snapshot are removed at open.
func TestMemorySnapshotTempFilesOnly(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"marks.snap.123456.tmp", "marks.snap.backup.tmp", "other.snap.42.tmp", "marks.snap..tmp"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o600))
	}
	st, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: filepath.Join(dir, "marks.snap")})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	var names []string
	for _, p := range tempSnapshots(t, dir) {
		names = append(names, filepath.Base(p))
	}
	assert.ElementsMatch(t, []string{"marks.snap.backup.tmp", "other.snap.42.tmp", "marks.snap..tmp"}, names)
}
