package dedupe_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// smallDisk mounts a tmpfs of size bytes for the test, or skips the test
// where the machine does not allow it (it needs root).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(size), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a small tmpfs to fill (needs root): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return dir
}

// fillDisk writes a file until the disk is full and returns its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			break
		}
	}
	return path
}

// A full disk fails writes with a clear error and loses nothing already
// written; once space is freed the same store, and a reopened one, work on.
func TestSQLiteFullDisk(t *testing.T) {
	dir := smallDisk(t, 8<<20)
	path := filepath.Join(dir, "dedupe.db")
	ctx := context.Background()
	s, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.NoError(t, err)
	defer s.Close()
	d := dedupe.New(s)
	defer d.Close()
	for i := range 50 {
		require.NoError(t, d.Do(ctx, key(i), nop))
	}

	filler := fillDisk(t, dir)
	var failed error
	for i := 50; i < 5000 && failed == nil; i++ { // the WAL may have room left for some
		failed = d.Do(ctx, key(i), nop)
	}
	require.Error(t, failed, "writes fail on a full disk")
	assert.Contains(t, failed.Error(), "disk is full")
	t.Logf("on a full disk: %v", failed)
	for i := range 50 {
		ok, err := s.Exists(ctx, key(i))
		require.NoError(t, err, "reads still work")
		assert.True(t, ok, "key %d written before the disk filled", i)
	}

	require.NoError(t, os.Remove(filler))
	var err2 error
	for range 50 { // the writer gets its transaction back at once
		if err2 = d.Do(ctx, dedupe.Key{Channel: "after", MessageID: "1"}, nop); err2 == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, err2, "the same store works again after space is freed")
	require.NoError(t, s.Close())

	s2, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.NoError(t, err, "and the file reopens")
	defer s2.Close()
	ok, err := s2.Exists(ctx, dedupe.Key{Channel: "after", MessageID: "1"})
	require.NoError(t, err)
	assert.True(t, ok)
	for i := range 50 {
		ok, err := s2.Exists(ctx, key(i))
		require.NoError(t, err)
		assert.True(t, ok, "key %d survived", i)
	}
	require.NoError(t, dedupe.New(s2).Do(ctx, dedupe.Key{Channel: "after", MessageID: "2"}, nop))
}
