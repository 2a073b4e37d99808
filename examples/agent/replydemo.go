package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/reply/replytest"
)

// replyDemo is one run of the replies demo (-platform): a chat gateway over
// a store, replying through the fake platform.
type replyDemo struct {
	out   io.Writer
	plat  *replytest.Server
	hangs chan replytest.Fault // the faults of the platform's calls, as they happen
	g     *replier
	model *model
	run   string
	bad   []string // the replies duplicated or lost without a report
}

// runReplies runs the replies demo: each step delivers a message (again
// until the gateway takes it, as a platform redelivers a webhook) and checks
// the platform got its reply once.
func runReplies(ctx context.Context, cfg config, out io.Writer) error {
	st, _, err := openStore(ctx, cfg.Store)
	if err != nil {
		return err
	}
	defer st.Close()
	dm := &replyDemo{out: out, hangs: make(chan replytest.Fault, 64), model: &model{delay: cfg.LLMDelay},
		run: fmt.Sprint(time.Now().UnixNano())}
	dm.plat = replytest.New(replytest.Config{Notify: func(f replytest.Fault) {
		if f == replytest.Hang {
			select {
			case dm.hangs <- f:
			default:
			}
		}
	}})
	if _, err := dm.plat.Start(); err != nil {
		return err
	}
	defer dm.plat.Close()
	d := dedupe.New(st)
	defer d.Close()
	dm.g, err = newReplier(replierConfig{channel: cfg.Platform, platform: cfg.Platform, policy: cfg.Policy, store: st, d: d,
		platformURL: dm.plat.URL(), timeout: 300 * time.Millisecond, lease: 10 * time.Second,
		model: func(ctx context.Context, in inbound) ([]byte, error) {
			s, _, err := dm.model.complete(ctx, in.Text)
			return []byte(s), err
		}})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "platform: %s, policy %s; store: %s (%s); fake platform %s\n",
		cfg.Platform, dm.g.policy, st.Backend(), cfg.Store, dm.plat.URL())
	steps := []struct {
		name  string
		fault replytest.Fault
	}{
		{"1. accepted, no answer:", replytest.Hang},
		{"2. accepted, then 5xx:", replytest.FailAfter},
		{"3. platform restarted:", -1},
		{"4. refused first (503):", replytest.FailBefore},
	}
	for i, s := range steps {
		if err := dm.step(ctx, i+1, s.name, s.fault); err != nil {
			return err
		}
	}
	if err := dm.crashed(ctx); err != nil {
		return err
	}
	if len(dm.bad) > 0 {
		return failf("%s", strings.Join(dm.bad, "; "))
	}
	return nil
}

// step delivers message n, with the platform's first call failing with
// fault (-1: hanging until the platform restarts), until the gateway takes
// it; then a copy of it, which sends nothing.
func (dm *replyDemo) step(ctx context.Context, n int, name string, fault replytest.Fault) error {
	in := inbound{ID: fmt.Sprintf("%s-%d", dm.run, n), Chat: "chat-1", Text: fmt.Sprintf("Question %d?", n)}
	calls := dm.model.calls.Load()
	restarted := make(chan error, 1)
	if fault < 0 {
		for len(dm.hangs) > 0 { // the earlier steps' hangs
			<-dm.hangs
		}
		dm.plat.Next(replytest.Hang)
		go func() { // restart the platform while the call hangs
			<-dm.hangs
			restarted <- dm.plat.Restart()
		}()
	} else {
		dm.plat.Next(fault)
		restarted <- nil
	}
	var log []string
	var out outcome
	for attempt := 1; ; attempt++ {
		var err error
		out, err = dm.g.handle(ctx, in)
		if err == nil {
			log = append(log, fmt.Sprintf("delivery %d: done", attempt))
			break
		}
		log = append(log, fmt.Sprintf("delivery %d: %s", attempt, short(err)))
		if attempt == 5 {
			return fmt.Errorf("message %d: not taken after %d deliveries: %w", n, attempt, err)
		}
	}
	if err := <-restarted; err != nil {
		return err
	}
	copyOut, err := dm.g.handle(ctx, in)
	if err != nil {
		return err
	}
	fmt.Fprintf(dm.out, "%-26s %s; a copy: copy=%v\n", name, strings.Join(log, "; "), copyOut.Copy)
	return dm.verify(in, out, dm.model.calls.Load()-calls)
}

// crashed is the last step: the gateway dies between the reply's send and
// the message's mark. Its send is made here by the Sender alone (the dead
// gateway's), without the Deduper's mark; the platform's redelivery then
// finds the reply's record and sends nothing.
func (dm *replyDemo) crashed(ctx context.Context) error {
	in := inbound{ID: dm.run + "-crash", Chat: "chat-1", Text: "Question 5?"}
	calls := dm.model.calls.Load()
	key := dedupe.Key{Channel: dm.g.channel, MessageID: in.ID}
	send, err := dm.g.client.Send(dm.g.name, in.Chat)
	if err != nil {
		return err
	}
	if _, err := dm.g.sender.Send(ctx, key, 0, func(ctx context.Context) ([]byte, error) { return dm.g.model(ctx, in) }, send); err != nil {
		return err
	}
	out, err := dm.g.handle(ctx, in)
	if err != nil {
		return err
	}
	fmt.Fprintf(dm.out, "%-26s sent, then the gateway died before the mark; redelivery: done, found sent: %v\n",
		"5. gateway died:", out.Resumed)
	return dm.verify(in, out, dm.model.calls.Load()-calls)
}

// verify prints what the platform holds of in's reply, and keeps a reply
// duplicated or lost without a report.
func (dm *replyDemo) verify(in inbound, out outcome, calls int64) error {
	var text string
	for _, m := range dm.plat.Messages() {
		if strings.Contains(m.Text, fmt.Sprintf("%q", in.Text)) {
			text = m.Text
		}
	}
	n := 0
	if text != "" {
		n = dm.plat.Count(in.Chat, text)
	}
	fmt.Fprintf(dm.out, "%26s replies on the platform: %d; model calls: %d; reported possibly lost: %v, possibly duplicated: %v\n",
		"", n, calls, out.MaybeLost, out.MaybeDup)
	switch {
	case n == 0 && !out.MaybeLost:
		dm.bad = append(dm.bad, fmt.Sprintf("the reply to %q was lost", in.Text))
	case n > 1 && !out.MaybeDup:
		dm.bad = append(dm.bad, fmt.Sprintf("the reply to %q was sent %d times", in.Text, n))
	case calls != 1:
		dm.bad = append(dm.bad, fmt.Sprintf("the model was called %d times for %q", calls, in.Text))
	}
	return nil
}

// short is the gist of a failed delivery's error.
func short(err error) string {
	s := err.Error()
	for _, k := range []string{"outcome unknown", "refused", "possibly lost", "in flight"} {
		if strings.Contains(s, k) {
			return k
		}
	}
	return s
}
