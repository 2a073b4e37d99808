package durabletest

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/queue"
)

// Environment of a child process of [Kill].
const (
	killPhaseEnv = "DURABLETEST_KILL_PHASE" // "first" or "restart"
	killNameEnv  = "DURABLETEST_KILL_NAME"
	killDirEnv   = "DURABLETEST_KILL_DIR"
	linePrefix   = "durabletest: "
)

// KillConfig describes the durable queue that [Kill] crashes.
type KillConfig struct {
	// Open returns the queue and the store of the deployment named name, in
	// the parent and in each child process: the same name must open the same
	// queue and store (the same stream or table; files go in dir, a
	// directory that the parent and the children share), and the queue's
	// visibility timeout should be short (about a second) for the test to be
	// quick. Kill closes both.
	Open func(t *testing.T, name, dir string) (queue.Queue, dedupe.Store)
	// Drop, if not nil, deletes what Open created for name on a shared
	// server; the parent calls it at the end of the test.
	Drop func(t *testing.T, name string)
	// Messages is how many messages are accepted. Default 40.
	Messages int
	// Workers is the [dedupehttp.WithWorkers] of the gateway. Default 4.
	Workers int
	// Lease is the [dedupe.WithLease] of the gateway's Deduper: how long a
	// killed worker's claim outlives it. Default 2 s; a negative Lease
	// gives no WithLease, so that the Deduper's default is the one crashed.
	Lease time.Duration
}

// KillReport is what [Kill] counted.
type KillReport struct {
	// Accepted counts the 202s the client got; Processed the messages whose
	// handler completed; Doubles those whose handler completed more than
	// once; Lost the accepted messages whose handler never completed.
	Accepted, Processed, Doubles, Lost int
	// Interrupted counts the messages whose handler was running when the
	// process was killed, and that a restarted process ran again.
	Interrupted int
	// Again counts the redeliveries after the restart that were accepted
	// again, their message having been settled between the gateway's
	// look-up and its push; each was settled as a duplicate.
	Again int
	// Recovery is the time from the SIGKILL until every accepted message
	// was done, the interrupted ones included, as the parent saw it.
	Recovery time.Duration
}

// Kill is the crash test of a durable queue. Call it from a top-level test
// function; it re-executes the test binary to run that same test as child
// processes, which it recognises by their environment.
//
// The first child serves a gateway: an [dedupehttp.Async] with the queue,
// a [dedupe.Deduper] on the store and a handler that records its start and
// its completion in an append-only file. The parent posts Messages messages,
// each answered 202; after the first 10 handlers completed, the next
// Workers block mid-handler, and the parent kills the child with SIGKILL.
// It starts a second child on the same queue and store (the restart),
// redelivers every message at once (none may be accepted again: each is
// marked or still queued), polls each queue id through
// [dedupehttp.Async.StatusHandler] until it is done, redelivers them all
// again (each is a duplicate), and stops the child. Then every accepted
// message must have completed its handler exactly once, and be marked in the
// store.
func Kill(t *testing.T, cfg KillConfig) KillReport {
	t.Helper()
	cfg.defaults()
	if phase := os.Getenv(killPhaseEnv); phase != "" {
		killChild(t, cfg, phase)
		return KillReport{}
	}
	if testing.Short() {
		t.Skip("kill -9 test skipped in -short mode")
	}
	k := &killRun{t: t, cfg: cfg, name: "qk" + strings.ToLower(rand.Text()[:12]), dir: t.TempDir()}
	if cfg.Drop != nil {
		t.Cleanup(func() { cfg.Drop(t, k.name) })
	}
	return k.run()
}

func (cfg *KillConfig) defaults() {
	if cfg.Messages <= 0 {
		cfg.Messages = 40
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.Lease == 0 {
		cfg.Lease = 2 * time.Second
	}
}

// eventsFile is the file in the shared directory where handlers record their
// starts and completions.
const eventsFile = "events"

// completeFirst is how many handlers complete in the first child before the
// next ones block.
const completeFirst = 10

// killChild is the gateway of a child process. It serves until its stdin is
// closed (or it is killed), then closes the Async gracefully.
func killChild(t *testing.T, cfg KillConfig, phase string) {
	name, dir := os.Getenv(killNameEnv), os.Getenv(killDirEnv)
	events, err := os.OpenFile(filepath.Join(dir, eventsFile), os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	q, store := cfg.Open(t, name, dir)
	defer store.Close()
	defer q.Close()
	out := &lineOut{w: os.Stdout}
	a := newKillGateway(cfg, name, phase, q, store, events, out)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /hook", a)
	mux.Handle("GET /queue/{id}", a.StatusHandler())
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	out.printf("listening %s", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes it
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	if err := a.Close(ctx); err != nil {
		t.Errorf("Async.Close: %v", err)
	}
	out.printf("closed")
}

// newKillGateway returns the Async of a child. Its handler appends "start
// <id> <pid>" to events, works 10 ms, and appends "end <id> <pid>"; in the
// first phase every handler after the first completeFirst blocks for good
// after its start.
func newKillGateway(cfg KillConfig, name, phase string, q queue.Queue, store dedupe.Store,
	events *os.File, out *lineOut) *dedupehttp.Async {
	var started atomic.Int32
	pid := os.Getpid()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, _ := dedupehttp.KeyFrom(r.Context())
		_, _ = fmt.Fprintf(events, "start %s %d\n", k.MessageID, pid)
		out.printf("start %s", k.MessageID)
		if phase == "first" && started.Add(1) > completeFirst {
			select {} // mid-handler when the process is killed
		}
		if phase == poisonPhase && k.MessageID == poisonID {
			killSelf() // a message that kills its worker: out of memory, a stack overflow…
		}
		time.Sleep(10 * time.Millisecond)
		_, _ = fmt.Fprintf(events, "end %s %d\n", k.MessageID, pid)
	})
	extract := func(r *http.Request) (dedupe.Key, error) {
		var m struct{ ID string }
		b, _ := dedupehttp.Body(r)
		if err := json.Unmarshal(b, &m); err != nil || m.ID == "" {
			return dedupe.Key{}, fmt.Errorf("%w: %s", dedupe.ErrNoMessageID, b)
		}
		return dedupe.Key{Channel: name, MessageID: m.ID}, nil
	}
	var opts []dedupe.Option
	if cfg.Lease > 0 {
		opts = append(opts, dedupe.WithLease(cfg.Lease))
	}
	d := dedupe.New(store, opts...)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	return dedupehttp.NewAsync(d, extract, h, dedupehttp.WithQueue(q), dedupehttp.WithWorkers(cfg.Workers),
		dedupehttp.WithLogger(logger), dedupehttp.WithMaxAttempts(poisonAttempts),
		dedupehttp.WithDone(func(_ context.Context, k dedupe.Key, err error) {
			if err == nil {
				out.printf("settled %s", k.MessageID)
			} else {
				out.printf("failed %s", k.MessageID)
			}
		}))
}

// lineOut writes whole lines from many goroutines, each with one write.
type lineOut struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineOut) printf(format string, args ...any) {
	line := linePrefix + fmt.Sprintf(format, args...) + "\n"
	l.mu.Lock()
	defer l.mu.Unlock()
	_, _ = io.WriteString(l.w, line)
}

// child is a running child process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string // its lines with linePrefix, without it
	addr  string
}

// killRun is the parent's side of Kill.
type killRun struct {
	t      *testing.T
	cfg    KillConfig
	name   string
	dir    string
	client http.Client
}

// start starts a child in phase and waits for its address.
func (k *killRun) start(phase string) *child {
	t := k.t
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var run []string
	for _, part := range strings.Split(t.Name(), "/") {
		run = append(run, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.Command(exe, "-test.run="+strings.Join(run, "/"), "-test.count=1")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOCOVERDIR=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, killPhaseEnv+"="+phase, killNameEnv+"="+k.name, killDirEnv+"="+k.dir)
	cmd.Stderr = os.Stderr
	c := &child{cmd: cmd, lines: make(chan string, 1024)}
	if c.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), linePrefix); ok {
				c.lines <- line
			}
		}
	}()
	addr := k.await(c, func(line string) bool { return strings.HasPrefix(line, "listening ") })
	c.addr = strings.TrimPrefix(addr, "listening ")
	return c
}

// await reads c's lines until done accepts one, and returns it.
func (k *killRun) await(c *child, done func(line string) bool) string {
	k.t.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case line, ok := <-c.lines:
			if !ok {
				k.t.Fatal("child exited early")
			}
			if done(line) {
				return line
			}
		case <-timeout:
			k.t.Fatal("child silent for 2 minutes")
		}
	}
}
