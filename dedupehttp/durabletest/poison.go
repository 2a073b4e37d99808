package durabletest

import (
	"crypto/rand"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe/queue"
)

// The poison test's settings.
const (
	poisonPhase    = "poison"
	poisonID       = "poison" // the message whose handler kills its process
	poisonAttempts = 3        // the gateway's dedupehttp.WithMaxAttempts
	poisonNormal   = 10       // messages processed before it, and after it again
	poisonStarts   = 8        // the most processes Poison starts
)

// PoisonReport is what [Poison] counted.
type PoisonReport struct {
	// Starts counts the gateway processes started, and Killed those that
	// the poison message killed.
	Starts, Killed int
	// Runs counts the poison message's handler runs (each killed its
	// process).
	Runs int
	// State and Reason are the poison message's in the queue at the end;
	// Attempts its attempts.
	State    queue.State
	Reason   string
	Attempts int
	// Processed counts the other messages processed, each once.
	Processed int
}

// Poison is the poison-message test of a durable queue: a message whose
// handler kills its own process (as an out-of-memory error, a stack
// overflow or os.Exit would) must stop after the gateway's attempts, not
// crash-loop it. Call it from a top-level test function, with the Open and
// Drop of [Kill]; it re-executes the test binary as [Kill] does.
//
// The gateway (an Async with WithMaxAttempts(3)) first processes 10
// messages. Then the poison message arrives: its handler records its start
// and SIGKILLs the process. The parent restarts the gateway each time it
// dies, up to 8 starts, and polls the message's state. The message must be
// failed with a reason after 3 runs (3 processes killed), the gateway must
// live on and process 10 more messages, and the queue must count and list
// the message among its failed ones.
func Poison(t *testing.T, cfg KillConfig) PoisonReport {
	t.Helper()
	cfg.defaults()
	if phase := os.Getenv(killPhaseEnv); phase != "" {
		killChild(t, cfg, phase)
		return PoisonReport{}
	}
	if testing.Short() {
		t.Skip("kill -9 test skipped in -short mode")
	}
	k := &killRun{t: t, cfg: cfg, name: "qp" + strings.ToLower(rand.Text()[:12]), dir: t.TempDir()}
	if cfg.Drop != nil {
		t.Cleanup(func() { cfg.Drop(t, k.name) })
	}
	return k.poison()
}

// poison is the parent's side of Poison.
func (k *killRun) poison() PoisonReport {
	t := k.t
	r := PoisonReport{Starts: 1}
	c := k.start(poisonPhase)
	exited := watch(c)
	k.acceptAll(c, "before-", poisonNormal)
	status, qid := k.post(c, poisonID)
	if status != http.StatusAccepted {
		t.Fatalf("poison message: status %d, want 202", status)
	}
	for {
		st, alive := k.poll(c, qid, exited)
		if st.State == "failed" {
			break
		}
		if alive {
			t.Fatalf("poison message %q while its gateway lives", st.State)
		}
		r.Killed++
		if r.Starts == poisonStarts {
			t.Fatalf("the poison message killed %d of %d processes and is still %q", r.Killed, r.Starts, st.State)
		}
		r.Starts++
		c = k.start(poisonPhase)
		exited = watch(c)
	}
	k.acceptAll(c, "after-", poisonNormal)
	_ = c.stdin.Close()
	k.await(c, func(line string) bool { return line == "closed" })
	if err := <-exited; err != nil {
		t.Errorf("last gateway: %v", err)
	}
	k.checkPoison(&r, qid)
	t.Logf("%d of %d gateway processes killed by the poison message; it ran %d times, then %s after %d attempts: %s; %d other messages processed once each",
		r.Killed, r.Starts, r.Runs, r.State, r.Attempts, r.Reason, r.Processed)
	return r
}

// acceptAll posts n messages with ids prefix1… and waits until each is done.
func (k *killRun) acceptAll(c *child, prefix string, n int) {
	accepted := map[string]string{}
	for i := range n {
		id := prefix + strconv.Itoa(i+1)
		status, qid := k.post(c, id)
		if status != http.StatusAccepted {
			k.t.Fatalf("message %s: status %d, want 202", id, status)
		}
		accepted[id] = qid
	}
	k.waitDone(c, accepted)
}

// watch returns a channel that receives the end of c's process.
func watch(c *child) <-chan error {
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	return exited
}

// killSelf ends the process at once, as SIGKILL does.
func killSelf() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Signal(os.Kill)
	}
	select {}
}

// poll waits until queue id qid is failed or done, or c's process dies
// (exited receives its end); it returns the last state seen and whether c
// still lives.
func (k *killRun) poll(c *child, qid string, exited <-chan error) (entryJSON, bool) {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			if err == nil || !strings.Contains(err.Error(), "killed") {
				k.t.Fatalf("gateway exited with %v, want killed", err)
			}
			return entryJSON{}, false
		default:
		}
		if st, ok := k.entry(c, qid); ok && (st.State == "failed" || st.State == "done") {
			return st, true
		}
		time.Sleep(50 * time.Millisecond) // a real process: nothing to wait on
	}
	k.t.Fatal("the poison message neither failed nor killed its gateway within 2 minutes")
	return entryJSON{}, false
}

// entryJSON is the answer of the status handler.
type entryJSON struct {
	State, Reason string
	Attempts      int
}

// entry asks c for the state of queue id qid; ok is false if c does not
// answer (it is being killed).
func (k *killRun) entry(c *child, qid string) (entryJSON, bool) {
	resp, err := k.client.Get("http://" + c.addr + "/queue/" + qid)
	if err != nil {
		return entryJSON{}, false
	}
	defer resp.Body.Close()
	var e entryJSON
	return e, json.NewDecoder(resp.Body).Decode(&e) == nil
}

// checkPoison reads the handlers' events and the queue, and checks that the
// poison message ran poisonAttempts times and is failed, and that every
// other message completed once.
func (k *killRun) checkPoison(r *PoisonReport, qid string) {
	t := k.t
	data, err := os.ReadFile(filepath.Join(k.dir, eventsFile))
	if err != nil {
		t.Fatal(err)
	}
	ends := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 3 && f[0] == "start" && f[1] == poisonID:
			r.Runs++
		case len(f) == 3 && f[0] == "end":
			ends[f[1]]++
		}
	}
	for _, prefix := range []string{"before-", "after-"} {
		for i := range poisonNormal {
			if id := prefix + strconv.Itoa(i+1); ends[id] == 1 {
				r.Processed++
			} else {
				t.Errorf("message %s processed %d times, want once", id, ends[id])
			}
		}
	}
	q, store := k.cfg.Open(t, k.name, k.dir)
	defer store.Close()
	defer q.Close()
	ctx := t.Context()
	e, ok, err := q.Status(ctx, qid)
	if err != nil || !ok {
		t.Fatalf("Status of the poison message: %v, %v", ok, err)
	}
	r.State, r.Reason, r.Attempts = e.State, e.Reason, e.Attempts
	if r.Runs != poisonAttempts || r.Killed != poisonAttempts || e.State != queue.StateFailed || e.Reason == "" {
		t.Errorf("poison message: %d runs, %d processes killed, %s (%q); want %d runs and kills, failed with a reason",
			r.Runs, r.Killed, e.State, e.Reason, poisonAttempts)
	}
	counts, err := q.Count(ctx)
	if err != nil || counts != (queue.Counts{Live: 0, Failed: 1}) {
		t.Errorf("Count = %+v, %v; want no live message and one failed", counts, err)
	}
	failed, err := q.Failed(ctx, 0)
	if err != nil || len(failed) != 1 || failed[0].ID != qid {
		t.Errorf("Failed = %+v, %v; want the poison message", failed, err)
	}
}
