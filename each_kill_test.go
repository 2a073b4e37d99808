package dedupe_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/killtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Environment of the children of the DoEach kill tests.
const (
	eachKillMode  = "DEDUPE_EACHKILL_MODE" // "block" (block in the 11th fn), "run" (run every pass until killed)
	eachKillStore = "DEDUPE_EACHKILL_STORE"
	eachKillLog   = "DEDUPE_EACHKILL_LOG"
	eachKillRound = "DEDUPE_EACHKILL_ROUND"
)

// eachKillSize is the batch's size; eachKillLease the lease of its claims;
// eachKillBatches the batches of the random kills (one for the kill mid-batch).
const (
	eachKillSize    = 40
	eachKillLease   = time.Second
	eachKillBatches = 5
)

func eachKillKey(i int) dedupe.Key {
	return dedupe.Key{Channel: "eachkill", MessageID: strconv.Itoa(i)}
}

// A process runs a batch of 40 messages through DoEach on a SQLite file and is
// SIGKILLed while the 11th message runs, the first 10 processed and marked; a
// restarted process redelivers the whole batch. Every message ends exactly
// once: the first 10 are duplicates, the 11th, interrupted, runs again, and
// the 29 the dead process had claimed but not started run once their lease
// ran out.
func TestDoEachKillMidBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	dir := t.TempDir()
	storePath, logPath := filepath.Join(dir, "each.db"), filepath.Join(dir, "runs.log")
	st := openSQLite(t, storePath, dedupe.SQLiteConfig{})
	env := []string{eachKillStore + "=" + storePath, eachKillLog + "=" + logPath, eachKillRound + "=0"}

	child := startEachChild(t, append(env, eachKillMode+"=block"))
	deadline := time.Now().Add(60 * time.Second)
	for !eachKillReady(t, st, logPath) {
		require.True(t, time.Now().Before(deadline), "the child never reached its 11th message with the first 10 marked")
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, child.Process.Kill()) // SIGKILL
	_ = child.Wait()
	killed := child.Process.Pid

	cfg := killtest.Config{Test: "TestDoEachKillChild", Env: append(env, eachKillMode+"=run")}
	killtest.Finish(t, cfg) // redelivers the batch until every message is settled

	runs := readEachLog(t, logPath)
	for i := range eachKillSize {
		id := strconv.Itoa(i)
		require.Len(t, runs.ends[id], 1, "ends of message %d", i)
		starts := pidsOf(runs.starts[id])
		switch {
		case i < 10:
			assert.Equal(t, []int{killed}, starts, "message %d ran in the first process only", i)
		case i == 10:
			require.Len(t, starts, 2, "the interrupted message ran again")
			assert.Equal(t, killed, starts[0])
			assert.NotEqual(t, killed, runs.ends[id][0].pid, "the interrupted message ended in the second process")
		default:
			require.Len(t, starts, 1, "message %d started once", i)
			assert.NotEqual(t, killed, starts[0], "message %d ran in the second process", i)
		}
		marked, err := st.Exists(context.Background(), eachKillKey(i))
		require.NoError(t, err)
		assert.True(t, marked, "message %d marked", i)
	}
}

func pidsOf(runs []eachRun) []int {
	pids := make([]int, len(runs))
	for i, r := range runs {
		pids[i] = r.pid
	}
	return pids
}

// eachKillReady reports whether the child started the 11th message and the
// first 10 are marked.
func eachKillReady(t *testing.T, st dedupe.Store, logPath string) bool {
	if len(readEachLog(t, logPath).starts["10"]) == 0 {
		return false
	}
	for i := range 10 {
		if ok, err := st.Exists(context.Background(), eachKillKey(i)); err != nil || !ok {
			return false
		}
	}
	return true
}

// Rounds of two processes running the batch through DoEach, again and again,
// each SIGKILLed at a random instant, then a last process that redelivers it
// until every message is settled. No message is lost, and none runs twice
// but where the kill came after its fn ended and before its mark landed:
// the store holds no record of that run, so the message is new again and a
// later process runs it. That is the one window DoEach leaves, as Do leaves
// it (DoTx closes it for an effect written in the store's own database); a
// test cannot tell from outside whether a given kill fell in it, but DoEach
// returns only once the batch's marks landed, so an end its process
// confirmed (it logged "done" after DoEach returned) is outside it. Per
// message, what is asserted is that:
//   - it ended at least once, and is marked at the end;
//   - no process ended it twice;
//   - no run of it starts in a round after one that left it marked;
//   - an end confirmed by its process is its last, and it ended at most
//     once more than the ends of processes killed before they confirmed.
func TestDoEachKill(t *testing.T) {
	if testing.Short() {
		t.Skip("multi-process test skipped in -short mode")
	}
	const rounds = 10
	dir := t.TempDir()
	storePath, logPath := filepath.Join(dir, "each.db"), filepath.Join(dir, "runs.log")
	st := openSQLite(t, storePath, dedupe.SQLiteConfig{})
	env := func(round int) []string {
		return []string{eachKillMode + "=run", eachKillStore + "=" + storePath, eachKillLog + "=" + logPath,
			eachKillRound + "=" + strconv.Itoa(round)}
	}
	markedBy := map[string]int{} // the first round after which each message was marked
	for round := range rounds {
		killtest.Run(t, killtest.Config{Test: "TestDoEachKillChild", Rounds: 1, MaxDelay: 2 * eachKillLease, Env: env(round)})
		for i := range eachKillBatches * eachKillSize {
			id := strconv.Itoa(i)
			if _, ok := markedBy[id]; ok {
				continue
			}
			ok, err := st.Exists(context.Background(), eachKillKey(i))
			require.NoError(t, err)
			if ok {
				markedBy[id] = round
			}
		}
	}
	killtest.Finish(t, killtest.Config{Test: "TestDoEachKillChild", Env: env(rounds)})

	runs := readEachLog(t, logPath)
	extra, unconfirmed := 0, 0
	for i := range eachKillBatches * eachKillSize {
		id := strconv.Itoa(i)
		ends := runs.ends[id]
		require.NotEmpty(t, ends, "message %d lost", i)
		ok, err := st.Exists(context.Background(), eachKillKey(i))
		require.NoError(t, err)
		assert.True(t, ok, "message %d marked at the end", i)
		pids := map[int]bool{}
		n := 0
		for j, e := range ends {
			assert.False(t, pids[e.pid], "message %d ended twice in process %d", i, e.pid)
			pids[e.pid] = true
			if e.confirmed {
				assert.Equal(t, len(ends)-1, j, "message %d ran again after an end its process confirmed", i)
			} else {
				n++
			}
		}
		if r, ok := markedBy[id]; ok {
			for _, s := range runs.starts[id] {
				assert.LessOrEqual(t, s.round, r, "message %d started in round %d, after round %d left it marked", i, s.round, r)
			}
		}
		assert.LessOrEqual(t, len(ends), 1+n, "message %d ended %d times, %d of them unconfirmed", i, len(ends), n)
		extra += len(ends) - 1
		unconfirmed += n
	}
	t.Logf("%d rounds of 2 processes SIGKILLed over %d batches of %d: %d extra runs; %d ends killed before their process confirmed them", rounds, eachKillBatches, eachKillSize, extra, unconfirmed)
}

// TestDoEachKillChild is a child of the DoEach kill tests: it runs the batch
// through DoEach, pass after pass as a queue would redeliver it, logging
// "start ID PID ROUND" and "end ID PID ROUND" around each fn, and
// "done -1 PID ROUND" once DoEach returned (every mark of the pass landed). In "block"
// mode the fn of message 10 blocks for good. A finishing child (killtest's
// last) stops once no message is left in flight.
func TestDoEachKillChild(t *testing.T) {
	mode := os.Getenv(eachKillMode)
	if mode == "" {
		t.Skip("a child process of the DoEach kill tests")
	}
	st := openSQLite(t, os.Getenv(eachKillStore), dedupe.SQLiteConfig{BusyTimeout: 30 * time.Second})
	logf, err := os.OpenFile(os.Getenv(eachKillLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	defer logf.Close()
	pid, round := os.Getpid(), os.Getenv(eachKillRound)
	note := func(what string, id int) {
		_, err := fmt.Fprintf(logf, "%s %d %d %s\n", what, id, pid, round) // one write: whole with O_APPEND
		require.NoError(t, err)
	}
	batches, work := 1, time.Millisecond // "block": one batch
	if mode == "run" {
		batches, work = eachKillBatches, 10*time.Millisecond // a pass of a few seconds, for kills to fall in
	}
	d := dedupe.New(st, dedupe.WithLease(eachKillLease))
	defer d.Close()
	finish := os.Getenv("KILLTEST_ROUND") == "finish"
	killtest.Ready()
	for pass := 0; ; pass++ {
		left, ran := 0, 0
		for b := range batches {
			keys := make([]dedupe.Key, eachKillSize)
			for i := range keys {
				keys[i] = eachKillKey(b*eachKillSize + i)
			}
			errs := d.DoEach(context.Background(), keys, func(ctx context.Context, i int) error {
				id := b*eachKillSize + i
				note("start", id)
				if mode == "block" && id == 10 {
					select {} // the lease is renewed meanwhile: only the kill ends this
				}
				time.Sleep(work) // the message's work
				note("end", id)
				return nil
			})
			note("done", -1)
			for i, err := range errs {
				switch {
				case err == nil:
					ran++
				case errors.Is(err, dedupe.ErrInFlight):
					left++ // a killed process's claim: its lease runs out
				case !errors.Is(err, dedupe.ErrDuplicate):
					require.NoError(t, err, "message %d", b*eachKillSize+i)
				}
			}
		}
		if (finish || mode == "block") && left == 0 {
			return
		}
		require.Less(t, pass, 200, "%d messages still in flight", left)
		if ran == 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// eachRun is one line of the children's log.
type eachRun struct {
	pid, round int
	confirmed  bool // for an end: its process logged "done" after it
}

// eachRuns is the log of the children: per message id, its starts and its
// ends, in the order written.
type eachRuns struct {
	starts, ends map[string][]eachRun
}

func readEachLog(t *testing.T, path string) eachRuns {
	r := eachRuns{starts: map[string][]eachRun{}, ends: map[string][]eachRun{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return r
	}
	require.NoError(t, err)
	type pending struct {
		id string
		j  int
	}
	unconfirmed := map[int][]pending{} // per pid, its ends not yet confirmed
	text := string(data)
	text = text[:strings.LastIndexByte(text, '\n')+1] // complete lines: a child may be writing
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		var what, id string
		var run eachRun
		_, err := fmt.Sscanf(line, "%s %s %d %d", &what, &id, &run.pid, &run.round)
		require.NoError(t, err, "log line %q", line)
		switch what {
		case "start":
			r.starts[id] = append(r.starts[id], run)
		case "end":
			r.ends[id] = append(r.ends[id], run)
			unconfirmed[run.pid] = append(unconfirmed[run.pid], pending{id, len(r.ends[id]) - 1})
		case "done":
			for _, p := range unconfirmed[run.pid] {
				r.ends[p.id][p.j].confirmed = true
			}
			delete(unconfirmed, run.pid)
		}
	}
	return r
}

// startEachChild starts a child of TestDoEachKillChild and waits until it is
// ready; the test kills it.
func startEachChild(t *testing.T, env []string) *exec.Cmd {
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^TestDoEachKillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if strings.Contains(lines.Text(), "killtest: ready") {
			go func() { // drain what the child prints until it dies
				for lines.Scan() {
				}
			}()
			return cmd
		}
	}
	t.Fatal("the child ended before it was ready")
	return nil
}
