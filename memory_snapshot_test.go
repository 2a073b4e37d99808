package dedupe_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
// whole one, never a torn file.
func TestMemorySnapshotKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "marks.snap")
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
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	require.Equal(t, 200, snapshots, "the child ran")

	st, err := dedupe.OpenMemoryStore(dedupe.MemoryConfig{SnapshotPath: path})
	require.NoError(t, err, "a whole snapshot survived the kill")
	defer st.Close()
	n := st.Len()
	assert.Positive(t, n)
	for i := range n { // each snapshot holds a prefix of the keys marked
		require.True(t, exists(t, st, key(i)), "key %d of a snapshot of %d", i, n)
	}
	assert.GreaterOrEqual(t, n, 2000)
	t.Logf("killed after %d snapshots; the last whole one held %d marks", snapshots, n)
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
