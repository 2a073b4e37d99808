package dedupe

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A snapshot file is the magic, then for each live mark the channel and the
// message id (each a uvarint length and the bytes) and the expiry (Unix
// nanoseconds, a varint), then the CRC-32C of everything before it, 4 bytes
// little-endian. Expiries are wall-clock times, so that they mean the same
// after a restart.
const snapshotMagic = "dedupe memory snapshot 1\n"

// defaultSnapshotInterval is the default [MemoryConfig.SnapshotInterval].
const defaultSnapshotInterval = time.Minute

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// OpenMemoryStore returns a memory store loaded with the snapshot at
// cfg.SnapshotPath, if there is one, that writes a snapshot there every
// cfg.SnapshotInterval and on Close. Expired marks are skipped; claims are never
// written. Temporary files that earlier runs left beside the snapshot (a
// process killed while it wrote one) are removed, so one path must serve one
// store at a time.
//
// A file at the path that cannot be read (not a regular file, such as a FIFO
// or a device; no permission; an I/O error) is an error and no store, so that
// it is never overwritten. A snapshot that is corrupt, truncated, foreign, or
// larger than any snapshot of MaxSize marks can be is refused whole (never
// half loaded, and never read beyond that size): the store starts empty, is
// returned with an error that says why, and its next snapshot replaces the
// file.
func OpenMemoryStore(cfg MemoryConfig) (*MemoryStore, error) {
	s := NewMemoryStore(cfg)
	if cfg.SnapshotPath == "" {
		return s, nil
	}
	removeTempSnapshots(cfg.SnapshotPath)
	err := s.loadSnapshot(cfg.SnapshotPath)
	if err != nil && !errors.Is(err, errBadSnapshot) {
		return nil, err
	}
	s.startSnapshots(cfg)
	return s, err
}

// SaveSnapshot writes the live marks to the snapshot file now, renaming a new
// file over the old so a crash leaves either whole.
func (s *MemoryStore) SaveSnapshot() error {
	if s.snapshotPath == "" {
		return nil
	}
	s.snapshotMu.Lock()
	defer s.snapshotMu.Unlock()
	return s.writeSnapshot(s.snapshotPath)
}

// startSnapshots starts the goroutine that writes a snapshot every interval,
// which Close stops.
func (s *MemoryStore) startSnapshots(cfg MemoryConfig) {
	s.snapshotPath = cfg.SnapshotPath
	every := orDefault(cfg.SnapshotInterval, defaultSnapshotInterval)
	s.stopSnapshots = make(chan struct{})
	s.snapshotsDone = make(chan struct{})
	go func() {
		defer close(s.snapshotsDone)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stopSnapshots:
				return
			case <-t.C:
				if err := s.SaveSnapshot(); err != nil {
					s.logger.Warn("dedupe: memory: snapshot", slog.String("path", s.snapshotPath), slog.Any("error", err))
				}
			}
		}
	}()
}

// Temporary snapshots are named after the snapshot: path.*.tmp, see
// [os.CreateTemp].
const tempSnapshotSuffix = ".tmp"

// writeSnapshot writes the live marks to a temporary file next to path and
// renames it to path.
func (s *MemoryStore) writeSnapshot(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*"+tempSnapshotSuffix)
	if err != nil {
		return fmt.Errorf("dedupe: memory: snapshot %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	crc := crc32.New(crc32c)
	w := bufio.NewWriter(io.MultiWriter(tmp, crc))
	if err := s.encodeMarks(w); err != nil {
		tmp.Close()
		return fmt.Errorf("dedupe: memory: snapshot %s: %w", path, err)
	}
	err = w.Flush()
	if err == nil {
		_, err = tmp.Write(binary.LittleEndian.AppendUint32(nil, crc.Sum32()))
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("dedupe: memory: snapshot %s: %w", path, err)
	}
	if dir, err := os.Open(filepath.Dir(path)); err == nil {
		_ = dir.Sync() // make the rename durable where the platform allows it
		dir.Close()
	}
	return nil
}

// encodeMarks writes the magic and the live marks, oldest first in each
// shard, so that loading them keeps their LRU order.
func (s *MemoryStore) encodeMarks(w *bufio.Writer) error {
	if _, err := w.WriteString(snapshotMagic); err != nil {
		return err
	}
	now, wall := s.clocks()
	var buf []byte
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		buf = buf[:0]
		sh.marks.oldestFirst(func(k Key, exp int64) {
			if exp <= now {
				return
			}
			buf = binary.AppendUvarint(buf, uint64(len(k.Channel)))
			buf = append(buf, k.Channel...)
			buf = binary.AppendUvarint(buf, uint64(len(k.MessageID)))
			buf = append(buf, k.MessageID...)
			buf = binary.AppendVarint(buf, wall+(exp-now))
		})
		sh.mu.Unlock()
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// errBadSnapshot is wrapped by the errors of a snapshot that is refused.
var errBadSnapshot = errors.New("not a valid snapshot")

// removeTempSnapshots removes the temporary files a writeSnapshot of path
// left when its process died, as far as it can: one it cannot remove is
// harmless, and the next run tries again.
func removeTempSnapshots(path string) {
	dir, prefix := filepath.Dir(path), filepath.Base(path)+"."
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		// CreateTemp's random part is decimal digits: leave other files be.
		if digits, ok := strings.CutSuffix(rest, tempSnapshotSuffix); ok && digits != "" &&
			strings.Trim(digits, "0123456789") == "" {
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// maxSnapshotRecord is the longest record of one mark: the longest channel
// and message id with their lengths, and the expiry.
const maxSnapshotRecord = binary.MaxVarintLen16 + maxChannelLen + binary.MaxVarintLen16 + maxMessageIDLen + binary.MaxVarintLen64

// loadSnapshot reads the snapshot at path, checks all of it, and only then
// adds its live marks. A missing file is an empty snapshot. The file is
// opened without blocking (a FIFO does not wait for a writer), read only if
// it is a regular file, and never beyond the largest snapshot the store can
// write.
func (s *MemoryStore) loadSnapshot(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dedupe: memory: read snapshot %s: %w", path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("dedupe: memory: read snapshot %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("dedupe: memory: read snapshot %s: not a regular file (%s)", path, info.Mode().Type())
	}
	limit := int64(len(snapshotMagic)) + int64(s.size())*maxSnapshotRecord + 4
	if info.Size() > limit {
		return fmt.Errorf("dedupe: memory: snapshot %s refused, starting empty: %w: %d bytes, more than %d marks can take (%d)",
			path, errBadSnapshot, info.Size(), s.size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return fmt.Errorf("dedupe: memory: read snapshot %s: %w", path, err)
	}
	if int64(len(data)) > limit { // it grew since Stat
		return fmt.Errorf("dedupe: memory: snapshot %s refused, starting empty: %w: more than %d bytes", path, errBadSnapshot, limit)
	}
	marks, err := decodeSnapshot(data)
	if err != nil {
		return fmt.Errorf("dedupe: memory: snapshot %s refused, starting empty: %w", path, err)
	}
	now, wall := s.clocks()
	for _, m := range marks {
		if left := m.expires - wall; left > 0 {
			sh, h := s.shard(m.key)
			sh.mu.Lock()
			evictedLive := s.addMark(sh, m.key, h, now+left, now)
			sh.mu.Unlock()
			if evictedLive {
				s.evictedLive()
			}
		}
	}
	return nil
}

// clocks returns the store's time and the wall-clock time, in nanoseconds.
// They are the same with an injected clock.
func (s *MemoryStore) clocks() (now, wall int64) {
	if s.now != nil {
		now = s.now().UnixNano()
		return now, now
	}
	return s.nanotime(), time.Now().UnixNano()
}

type snapshotMark struct {
	key     Key
	expires int64 // Unix nanoseconds
}

// decodeSnapshot parses a whole snapshot file, or fails without a result.
func decodeSnapshot(data []byte) ([]snapshotMark, error) {
	if len(data) < len(snapshotMagic)+4 || !bytes.HasPrefix(data, []byte(snapshotMagic)) {
		return nil, fmt.Errorf("%w: it does not start with %q", errBadSnapshot, snapshotMagic[:len(snapshotMagic)-1])
	}
	body, sum := data[:len(data)-4], binary.LittleEndian.Uint32(data[len(data)-4:])
	if crc32.Checksum(body, crc32c) != sum {
		return nil, fmt.Errorf("%w: checksum mismatch (corrupt or truncated)", errBadSnapshot)
	}
	var marks []snapshotMark
	r := body[len(snapshotMagic):]
	for len(r) > 0 {
		var m snapshotMark
		var ok bool
		if m.key.Channel, r, ok = readSnapshotString(r, maxChannelLen); !ok {
			return nil, fmt.Errorf("%w: bad channel in record %d", errBadSnapshot, len(marks))
		}
		if m.key.MessageID, r, ok = readSnapshotString(r, maxMessageIDLen); !ok {
			return nil, fmt.Errorf("%w: bad message id in record %d", errBadSnapshot, len(marks))
		}
		exp, n := binary.Varint(r)
		if n <= 0 {
			return nil, fmt.Errorf("%w: bad expiry in record %d", errBadSnapshot, len(marks))
		}
		r, m.expires = r[n:], exp
		if err := m.key.Validate(); err != nil {
			return nil, fmt.Errorf("%w: record %d: %w", errBadSnapshot, len(marks), err)
		}
		marks = append(marks, m)
	}
	return marks, nil
}

// readSnapshotString reads a uvarint length of at most max and that many bytes.
func readSnapshotString(r []byte, max int) (string, []byte, bool) {
	n, k := binary.Uvarint(r)
	if k <= 0 || n > uint64(max) || uint64(len(r)-k) < n {
		return "", r, false
	}
	return string(r[k : k+int(n)]), r[k+int(n):], true
}

// size returns MaxSize: the most marks the store holds.
func (s *MemoryStore) size() int {
	n := 0
	for i := range s.shards {
		n += s.shards[i].marks.size
	}
	return n
}
