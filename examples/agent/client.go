package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/idempotency"
)

// answer is what the client got for one request.
type answer struct {
	status   int
	ctype    string
	location string
	replayed bool
	body     []byte
}

// same reports whether r is o again: status, kept headers and body.
func (r answer) same(o answer) bool {
	return r.status == o.status && r.ctype == o.ctype && r.location == o.location && bytes.Equal(r.body, o.body)
}

// send posts message to the gateway at url with the Idempotency-Key key.
func send(ctx context.Context, url, key, message string) (answer, error) {
	body, _ := json.Marshal(messageIn{Message: message})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer demo-user")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{
		status:   resp.StatusCode,
		ctype:    resp.Header.Get("Content-Type"),
		location: resp.Header.Get("Location"),
		replayed: resp.Header.Get(idempotency.HeaderReplayed) == "true",
		body:     b,
	}, err
}

// demo is one run of the client against a gateway over a store.
type demo struct {
	cfg     config
	out     io.Writer
	model   *model
	store   dedupe.Store
	durable bool
	gw      *gateway
	run     string // the prefix of this run's keys
}

// run runs the four steps of the package comment.
func run(ctx context.Context, cfg config, out io.Writer) error {
	st, durable, err := openStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	m := &model{delay: cfg.LLMDelay, started: make(chan string, 8)}
	g, err := startGateway(st, m)
	if err != nil {
		_ = st.Close()
		return err
	}
	dm := &demo{cfg: cfg, out: out, model: m, store: st, durable: durable, gw: g,
		run: fmt.Sprint(time.Now().UnixNano())}
	defer dm.close()
	fmt.Fprintf(out, "store: %s (%s), gateway %s\n", st.Backend(), cfg.Store, g.url)
	first, err := dm.retry(ctx)
	if err != nil {
		return err
	}
	if err := dm.concurrent(ctx); err != nil {
		return err
	}
	if err := dm.reused(ctx); err != nil {
		return err
	}
	return dm.restart(ctx, first)
}

func (dm *demo) key(n int) string { return fmt.Sprintf(`"%s-%d"`, dm.run, n) }

// retry is step 1: a message and the client's retry after the reply.
func (dm *demo) retry(ctx context.Context) (answer, error) {
	first, err := send(ctx, dm.gw.url, dm.key(1), "What is an idempotency key?")
	if err != nil {
		return answer{}, err
	}
	<-dm.model.started
	if first.status != http.StatusCreated || first.replayed {
		return answer{}, failf("first request: status %d, replayed %v: %s", first.status, first.replayed, first.body)
	}
	again, err := send(ctx, dm.gw.url, dm.key(1), "What is an idempotency key?")
	if err != nil {
		return answer{}, err
	}
	fmt.Fprintf(dm.out, "1. first reply:       %d %s", first.status, first.body)
	fmt.Fprintf(dm.out, "   client's retry:    %d replayed=%v, same reply: %v; model calls: %d\n",
		again.status, again.replayed, again.same(first), dm.model.calls.Load())
	if !again.same(first) || !again.replayed || dm.model.calls.Load() != 1 {
		return answer{}, failf("the retry got %d %s, model calls %d", again.status, again.body, dm.model.calls.Load())
	}
	return first, nil
}

// concurrent is step 2: a retry sent while the first request waits on the
// model waits for it and gets its reply.
func (dm *demo) concurrent(ctx context.Context) error {
	waits := dm.gw.d.Stats().Waits
	type result struct {
		r   answer
		err error
	}
	hold := make(chan struct{})
	dm.model.hold.Store(&hold)
	defer dm.model.hold.Store(nil)
	firstc, againc := make(chan result, 1), make(chan result, 1)
	go func() {
		r, err := send(ctx, dm.gw.url, dm.key(2), "Summarise our chat.")
		firstc <- result{r, err}
	}()
	<-dm.model.started // the first request is with the model now
	go func() {
		r, err := send(ctx, dm.gw.url, dm.key(2), "Summarise our chat.")
		againc <- result{r, err}
	}()
waiting:
	for dm.gw.d.Stats().Waits == waits { // until the retry waits for the first
		select {
		case r := <-againc: // it did not wait: the check below says so
			againc <- r
			break waiting
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(hold)
	first, second := <-firstc, <-againc
	if first.err != nil || second.err != nil {
		return fmt.Errorf("concurrent requests: %v, %v", first.err, second.err)
	}
	again := second.r
	waited := dm.gw.d.Stats().Waits - waits
	fmt.Fprintf(dm.out, "2. first reply:       %d %s", first.r.status, first.r.body)
	fmt.Fprintf(dm.out, "   concurrent retry:  %d replayed=%v after waiting (%d wait), same reply: %v; model calls: %d\n",
		again.status, again.replayed, waited, again.same(first.r), dm.model.calls.Load())
	if first.r.status != http.StatusCreated || !again.same(first.r) || !again.replayed || waited != 1 || dm.model.calls.Load() != 2 {
		return failf("the concurrent retry got %d %s after %d waits, model calls %d", again.status, again.body, waited, dm.model.calls.Load())
	}
	return nil
}

// reused is step 3: the first key with another message is refused.
func (dm *demo) reused(ctx context.Context) error {
	r, err := send(ctx, dm.gw.url, dm.key(1), "Something else entirely.")
	if err != nil {
		return err
	}
	var p struct{ Type, Title string }
	_ = json.Unmarshal(r.body, &p)
	fmt.Fprintf(dm.out, "3. key reused:        %d %s (%s); model calls: %d\n", r.status, p.Title, r.ctype, dm.model.calls.Load())
	if r.status != http.StatusUnprocessableEntity || dm.model.calls.Load() != 2 {
		return failf("a reused key got %d %s", r.status, r.body)
	}
	return nil
}

// restart is step 4: the gateway restarts over the store, opened again, and
// the retry of the first message still gets the first reply.
func (dm *demo) restart(ctx context.Context, first answer) error {
	if !dm.durable {
		fmt.Fprintln(dm.out, "4. restart:           skipped: a memory store forgets its keys when the gateway stops")
		return nil
	}
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := dm.gw.stop(sctx); err != nil {
		return err
	}
	dm.gw = nil
	if err := dm.store.Close(); err != nil {
		return err
	}
	dm.store = nil
	st, _, err := openStore(ctx, dm.cfg.Store)
	if err != nil {
		return err
	}
	dm.store = st
	if dm.gw, err = startGateway(st, dm.model); err != nil {
		return err
	}
	again, err := send(ctx, dm.gw.url, dm.key(1), "What is an idempotency key?")
	if err != nil {
		return err
	}
	fmt.Fprintf(dm.out, "4. after a restart:   %d replayed=%v, same reply: %v; model calls: %d\n",
		again.status, again.replayed, again.same(first), dm.model.calls.Load())
	if !again.same(first) || !again.replayed || dm.model.calls.Load() != 2 {
		return failf("after the restart the retry got %d %s, model calls %d", again.status, again.body, dm.model.calls.Load())
	}
	return nil
}

// close stops the gateway and closes the store, whichever are open.
func (dm *demo) close() {
	if dm.gw != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = dm.gw.stop(ctx)
		cancel()
	}
	if dm.store != nil {
		_ = dm.store.Close()
	}
}
