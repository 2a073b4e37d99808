package durabletest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
)

// run is the parent's side of Kill: see there.
func (k *killRun) run() KillReport {
	t := k.t
	first := k.start("first")
	accepted := map[string]string{} // message id -> queue id
	for i := range k.cfg.Messages {
		id := strconv.Itoa(i + 1)
		status, qid := k.post(first, id)
		if status != http.StatusAccepted || qid == "" {
			t.Fatalf("message %s: status %d, queue id %q; want 202 with an id", id, status, qid)
		}
		accepted[id] = qid
	}
	started, settled := 0, 0
	k.await(first, func(line string) bool {
		switch {
		case strings.HasPrefix(line, "start "):
			started++
		case strings.HasPrefix(line, "settled "):
			settled++
		}
		return started == completeFirst+k.cfg.Workers && settled == completeFirst
	})
	killed := time.Now()
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := first.cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("first child: %v, want killed", err)
	}
	t.Logf("killed the gateway with %d handlers done and %d mid-handler; restarting", settled, started-settled)

	second := k.start("restart")
	// The platform redelivers every message while the restarted gateway
	// works: each is marked (200) or still queued (503), or was settled
	// between the gateway's look-up and its push (202: queued again, to be
	// settled as a duplicate without the handler).
	again := map[string]string{}
	for id := range accepted {
		switch status, qid := k.post(second, id); status {
		case http.StatusOK, http.StatusServiceUnavailable:
		case http.StatusAccepted:
			again[id+" again"] = qid
		default:
			t.Errorf("redelivery of %s after the restart: status %d, want 200, 503 or 202", id, status)
		}
	}
	k.waitDone(second, accepted)
	k.waitDone(second, again)
	recovery := time.Since(killed)
	for id := range accepted {
		if status, _ := k.post(second, id); status != http.StatusOK {
			t.Errorf("redelivery of %s once done: status %d, want 200", id, status)
		}
	}
	_ = second.stdin.Close()
	k.await(second, func(line string) bool { return line == "closed" })
	if err := second.cmd.Wait(); err != nil {
		t.Errorf("second child: %v", err)
	}
	r := k.count(accepted)
	r.Again, r.Recovery = len(again), recovery
	t.Logf("accepted %d, processed %d, doubles %d, lost %d; %d interrupted by SIGKILL and run again after the restart; %d redeliveries accepted again and settled as duplicates; all done %v after the kill",
		r.Accepted, r.Processed, r.Doubles, r.Lost, r.Interrupted, r.Again, r.Recovery.Round(100*time.Millisecond))
	return r
}

// post delivers message id to c, and returns the status and queue id.
func (k *killRun) post(c *child, id string) (int, string) {
	k.t.Helper()
	body := fmt.Sprintf(`{"id":%q}`, id)
	resp, err := k.client.Post("http://"+c.addr+"/hook", "application/json", bytes.NewReader([]byte(body)))
	if err != nil {
		k.t.Fatalf("post %s: %v", id, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get(dedupehttp.HeaderQueueID)
}

// waitDone polls the state of every accepted message until each is done.
func (k *killRun) waitDone(c *child, accepted map[string]string) {
	k.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for id, qid := range accepted {
		for {
			state := k.state(c, qid)
			if state == "done" {
				break
			}
			if state == "" || state == "failed" || time.Now().After(deadline) { // "": unknown, lost
				k.t.Fatalf("message %s (queue id %s) is %q", id, qid, state)
			}
			time.Sleep(50 * time.Millisecond) // a real process: nothing to wait on
		}
	}
}

// state asks c for the state of queue id qid.
func (k *killRun) state(c *child, qid string) string {
	resp, err := k.client.Get("http://" + c.addr + "/queue/" + qid)
	if err != nil {
		k.t.Fatalf("status of %s: %v", qid, err)
	}
	defer resp.Body.Close()
	var s struct{ State string }
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		k.t.Fatalf("status of %s: %v", qid, err)
	}
	return s.State
}

// count reads the handlers' events and the store, and checks that every
// accepted message completed once and is marked.
func (k *killRun) count(accepted map[string]string) KillReport {
	t := k.t
	data, err := os.ReadFile(filepath.Join(k.dir, eventsFile))
	if err != nil {
		t.Fatal(err)
	}
	starts, ends := map[string]int{}, map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("event %q", line)
		}
		if f[0] == "start" {
			starts[f[1]]++
		} else {
			ends[f[1]]++
		}
	}
	q, store := k.cfg.Open(t, k.name, k.dir)
	defer q.Close()
	defer store.Close()
	r := KillReport{Accepted: len(accepted)}
	for id := range accepted {
		switch n := ends[id]; {
		case n == 0:
			r.Lost++
			t.Errorf("message %s accepted, never processed", id)
		case n > 1:
			r.Doubles++
			t.Errorf("message %s processed %d times", id, n)
		}
		if ends[id] > 0 {
			r.Processed++
		}
		if starts[id] > 1 {
			r.Interrupted++
		}
		marked, err := store.Exists(context.Background(), dedupe.Key{Channel: k.name, MessageID: id})
		if err != nil || !marked {
			t.Errorf("message %s: marked %v, %v", id, marked, err)
		}
	}
	if r.Interrupted != k.cfg.Workers {
		t.Errorf("%d messages started twice, want the %d killed mid-handler", r.Interrupted, k.cfg.Workers)
	}
	return r
}
