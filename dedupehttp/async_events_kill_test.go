package dedupehttp_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/queue"
)

// Environment of a child process of TestAsyncEventsKill.
const (
	eventsKillPhaseEnv = "DEDUPEHTTP_EVENTS_KILL_PHASE" // "first" or "restart"
	eventsKillDirEnv   = "DEDUPEHTTP_EVENTS_KILL_DIR"
)

// eventsKillBatches and eventsKillPerBatch shape the LINE batches the
// parent posts; eventsKillDone handlers complete in the first process
// before the next ones block, mid-handler, until it is killed.
const eventsKillBatches, eventsKillPerBatch, eventsKillDone = 8, 3, 5

// TestAsyncEventsKill crashes a gateway that accepts LINE batches with
// NewAsyncEvents on a SQLite queue and store: a child process accepts 8
// batches of 3 events (each answered 200 once its events are queued), runs
// 5 handlers, blocks in the next 2, and is killed with SIGKILL. A second
// process on the same file gets every batch again (each answered 200,
// pushing nothing but what it may find settled meanwhile), and runs the rest.
// Every event completes its handler exactly once; the 2 interrupted ones
// start twice.
func TestAsyncEventsKill(t *testing.T) {
	if phase := os.Getenv(eventsKillPhaseEnv); phase != "" {
		eventsKillChild(t, phase, os.Getenv(eventsKillDirEnv))
		return
	}
	if testing.Short() {
		t.Skip("kill -9 test skipped in -short mode")
	}
	dir := t.TempDir()
	first := startEventsChild(t, dir, "first")
	for b := range eventsKillBatches {
		code, _ := first.post(t, b)
		require.Equal(t, http.StatusOK, code, "batch %d", b)
	}
	starts := func() int { return strings.Count(readEventsLog(t, dir), "start ") }
	waitFor(t, "the first handlers", func() bool { return starts() >= eventsKillDone+2 })
	require.NoError(t, first.cmd.Process.Signal(syscall.SIGKILL))
	_ = first.cmd.Wait()

	second := startEventsChild(t, dir, "restart")
	for b := range eventsKillBatches {
		code, _ := second.post(t, b)
		require.Equal(t, http.StatusOK, code, "redelivered batch %d", b)
	}
	total := eventsKillBatches * eventsKillPerBatch
	waitFor(t, "every event", func() bool { return strings.Count(readEventsLog(t, dir), "end ") >= total })
	// A handler logs its end just before it returns, and its mark follows:
	// a batch is answered "duplicate" once its last mark landed, "queued"
	// until then (its events still have their live queue messages, so a
	// redelivery pushes nothing).
	for b := range eventsKillBatches {
		waitFor(t, fmt.Sprintf("batch %d answered as processed", b), func() bool {
			code, verdict := second.post(t, b)
			require.Equal(t, http.StatusOK, code, "batch %d", b)
			return verdict == "duplicate"
		})
	}
	require.NoError(t, second.stdin.Close())
	require.NoError(t, second.cmd.Wait())

	ends, startCount := map[string]int{}, map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(readEventsLog(t, dir)), "\n") {
		var kind, id string
		_, err := fmt.Sscan(line, &kind, &id)
		require.NoError(t, err, line)
		map[string]map[string]int{"start": startCount, "end": ends}[kind][id]++
	}
	require.Len(t, ends, total, "events completed")
	interrupted := 0
	for id, n := range ends {
		assert.Equal(t, 1, n, "completions of %s", id)
		if startCount[id] > 1 {
			interrupted++
		}
	}
	assert.Equal(t, 2, interrupted, "events whose handler the kill interrupted, run again")
}

// waitFor polls cond until it holds; a minute is the failure bound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within a minute", what)
		}
		time.Sleep(20 * time.Millisecond) // polling a file another process writes
	}
}

func readEventsLog(t *testing.T, dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "events"))
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

// eventsChild is a gateway process of TestAsyncEventsKill.
type eventsChild struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

func startEventsChild(t *testing.T, dir, phase string) *eventsChild {
	cmd := exec.Command(os.Args[0], "-test.run=^TestAsyncEventsKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), eventsKillPhaseEnv+"="+phase, eventsKillDirEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if addr, ok := strings.CutPrefix(sc.Text(), "listening "); ok {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return &eventsChild{cmd: cmd, stdin: stdin, addr: addr}
		}
	}
	t.Fatalf("child %s did not listen", phase)
	return nil
}

// killBatch is LINE batch b of the kill test.
func killBatch(b int) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"destination":"U0","events":[`)
	for e := range eventsKillPerBatch {
		if e > 0 {
			buf.WriteByte(',')
		}
		fmt.Fprintf(&buf, `{"type":"message","webhookEventId":"01KILL%02d%02d","message":{"type":"text","text":"hi"}}`, b, e)
	}
	buf.WriteString(`]}`)
	return buf.Bytes()
}

// post posts batch b signed as LINE does, and returns the answer's status
// and verdict.
func (c *eventsChild) post(t *testing.T, b int) (int, string) {
	body := killBatch(b)
	mac := hmac.New(sha256.New, []byte(eventsSecret))
	mac.Write(body)
	req, err := http.NewRequest(http.MethodPost, "http://"+c.addr+"/line", bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("X-Line-Signature", base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get(dedupehttp.HeaderVerdict)
}

// eventsKillChild serves NewAsyncEvents on the SQLite file of dir until its
// stdin is closed, or it is killed. Its handler appends "start <id>" and
// "end <id>" to dir/events; in the first phase, every handler after the
// first eventsKillDone blocks for good after its start.
func eventsKillChild(t *testing.T, phase, dir string) {
	path := filepath.Join(dir, "gateway.db")
	q, err := queue.OpenSQLite(path, queue.SQLiteConfig{Visibility: time.Second, PollInterval: 50 * time.Millisecond})
	require.NoError(t, err)
	defer q.Close()
	store, err := dedupe.OpenSQLite(path, dedupe.SQLiteConfig{})
	require.NoError(t, err)
	defer store.Close()
	log, err := os.OpenFile(filepath.Join(dir, "events"), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer log.Close()
	var started atomic.Int32
	a := dedupehttp.NewAsyncEvents(dedupe.New(store, dedupe.WithLease(time.Second)), linePreset(),
		func(_ *http.Request, ev platform.Event) error {
			_, _ = fmt.Fprintf(log, "start %s\n", ev.ID)
			if phase == "first" && started.Add(1) > eventsKillDone {
				select {} // mid-handler when the process is killed
			}
			_, _ = fmt.Fprintf(log, "end %s\n", ev.ID)
			return nil
		}, q, dedupehttp.WithWorkers(2), dedupehttp.WithLogger(quiet))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: a}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("listening %s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	require.NoError(t, a.Close(ctx))
}
