package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// capacityMarks is how many marks TestStatsCapacity writes to each store.
const capacityMarks = 2000

// "dedupe stats" says what a mark costs each store and, where the store can
// tell, how many more fit: the free disk of a SQLite file, PostgreSQL's
// shared_buffers, Redis's maxmemory (with a word on its policy), a memory
// snapshot's max_size.
func TestStatsCapacity(t *testing.T) {
	snap := filepath.Join(t.TempDir(), "marks.snapshot")
	for _, c := range []struct {
		name, url string
		want      []string // lines the output has, as regular expressions
		room      bool     // a room line with a positive count
		shared    bool     // a server other tests write to at once: its memory is not ours alone
	}{
		{"sqlite", "sqlite:" + filepath.Join(t.TempDir(), "gateway.db"),
			[]string{`bytes/mark: \d+ \(\d+ bytes of database file and WAL / 2000 marks and claims\)`, `room: \d+ more marks \(free disk \d+\)`}, true, false},
		{"memory", "memory:" + snap + "?max_size=5000",
			[]string{`bytes/mark: \d+ \(\d+ bytes of snapshot file`, `room: 3000 more marks \(max_size 5000\)`}, true, false},
		{"redis", redisURL(t),
			[]string{`bytes/mark: \d+ \(\d+ bytes of server memory since startup`}, false, true},
		{"redis-maxmemory", privateRedisURL(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"),
			[]string{`bytes/mark: \d+ \(\d+ bytes of server memory since startup`, `room: \d+ more marks \(maxmemory 67108864, policy allkeys-lru\)`,
				`note: allkeys-lru: at maxmemory the server drops live marks and claims`}, true, false},
		{"postgres", postgresURL(t),
			[]string{`bytes/mark: \d+ \(\d+ bytes of table, partitions and indexes / 2000 marks and claims\)`, `room: \d+ more marks \(shared_buffers \d+`}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, err := openStore(ctx, c.url, dest)
			require.NoError(t, err, "open")
			keys := make([]dedupe.Key, capacityMarks)
			exps := make([]time.Time, capacityMarks)
			for i := range keys {
				keys[i] = dedupe.Key{Channel: "telegram", MessageID: strconv.Itoa(1_000_000_000 + i)}
				exps[i] = time.Now().Add(time.Hour)
			}
			_, err = s.Store.(dedupe.BulkMarker).MarkUntil(ctx, keys, exps)
			require.NoError(t, err, "MarkUntil")
			require.NoError(t, s.close(), "close")

			code, out, errOut := runCmd(t, "stats", c.url)
			require.Equal(t, exitOK, code, "output:\n%s%s", out, errOut)
			t.Logf("dedupe stats %s:\n%s", c.name, out)
			flat := strings.Join(strings.Fields(out), " ")
			for _, want := range c.want {
				assert.Regexp(t, regexp.MustCompile(want), flat, "output:\n%s", out)
			}
			perMark := regexp.MustCompile(`bytes/mark: (\d+) `).FindStringSubmatch(flat)
			if assert.Len(t, perMark, 2, "output:\n%s", out) {
				n, _ := strconv.Atoi(perMark[1])
				assert.Greater(t, n, 19, "bytes per mark: at least the key's 19 bytes")
				if !c.shared { // the shared server holds what the other packages' tests write meanwhile
					assert.Less(t, n, 10_000, "bytes per mark")
				}
			}
			if c.room {
				room := regexp.MustCompile(`room: (\d+) more marks`).FindStringSubmatch(flat)
				if assert.Len(t, room, 2, "output:\n%s", out) {
					n, _ := strconv.Atoi(room[1])
					assert.Positive(t, n, "room")
				}
			}
		})
	}
}

// privateRedisURL starts a redis-server of the test's own, on a free port,
// with extra arguments, and returns its URL; the server is killed when t
// ends.
func privateRedisURL(t *testing.T, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		skipOrFail(t, "redis-server is not on PATH")
		return ""
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())
	args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, extra...)
	cmd := exec.Command(bin, args...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	require.Eventually(t, func() bool { return c.Ping(context.Background()).Err() == nil }, 10*time.Second, 20*time.Millisecond,
		"redis-server on %s does not answer", addr)
	return "redis://" + addr + "/0"
}
