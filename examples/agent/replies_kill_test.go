package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest/killtest"
	"github.com/gatewaykit/dedupe/reply/replytest"
)

// A lane is one stream of messages of the kill test: a platform's semantics
// and, for Telegram, a policy; window, if not 0, is the token window the
// gateway's Sender assumes instead of the preset's.
type lane struct {
	name, platform, policy string
	window                 time.Duration
}

// lanes are the kill test's streams. Discord's preset assumes a conservative
// minute for its "few minutes"; the fake platform honours a nonce for 3
// minutes (replytest.Config.DiscordWindow's default), and the gateways
// assume as much: on a loaded machine a message whose gateways keep dying
// can wait more than a minute for its resend, and the preset would then
// report it possibly lost (as it must past its window) instead of resending
// it. The proof is about tokens; reply's own tests cover the window.
var lanes = []lane{
	{"line", replytest.LINE, "", 0},
	{"discord", replytest.Discord, "", 3 * time.Minute},
	{"feishu", replytest.Feishu, "", 0},
	{"telegram-amo", replytest.Telegram, "at-most-once", 0},
	{"telegram-alo", replytest.Telegram, "at-least-once", 0},
}

// The environment of a gateway child of TestRepliesKill.
const (
	envInbox    = "AGENT_REPLIES_INBOX"    // the test's URL, where the child takes deliveries
	envPlatform = "AGENT_REPLIES_PLATFORM" // the fake platform's URL
	envStore    = "AGENT_REPLIES_STORE"    // the store, as -store names it
)

// killLease is the gateways' lease of a message's claim and of a reply's
// lock: what a killed gateway's claims block its messages for.
const killLease = 2 * time.Second

// TestRepliesKill is the proof of issue 37: gateway processes (this test
// binary, run as TestRepliesGateway) on one SQLite file take a stream of
// messages per lane from the test, which redelivers each until a gateway
// acks it, and reply through a fake platform that the test serves (so it
// survives them), which hangs, fails after and before accepting, refuses
// and restarts. Each gateway is SIGKILLed at a random instant, 200 rounds,
// then one runs until every message is acked. Then, per lane:
//   - LINE, Discord, Feishu (native tokens): every message's reply is on the
//     platform exactly once;
//   - Telegram at most once: no reply twice, and every reply missing was
//     reported possibly lost;
//   - Telegram at least once: every reply there, and every reply there twice
//     was reported possibly duplicated.
func TestRepliesKill(t *testing.T) {
	if os.Getenv(envInbox) != "" {
		t.Skip("a child of the kill test")
	}
	rounds := 200
	if testing.Short() {
		rounds = 20
	}
	killRun(t, "sqlite:"+filepath.Join(t.TempDir(), "gateway.db"), rounds)
}

// TestRepliesKillServers is TestRepliesKill on Redis and PostgreSQL, when
// their servers are given (DEDUPE_REDIS_ADDR, DEDUPE_POSTGRES_DSN), with 50
// rounds each.
func TestRepliesKillServers(t *testing.T) {
	if os.Getenv(envInbox) != "" {
		t.Skip("a child of the kill test")
	}
	rounds := 50
	if testing.Short() {
		rounds = 10
	}
	for env, store := range map[string]func(string) string{
		"DEDUPE_REDIS_ADDR":   func(v string) string { return "redis://" + v + "/0" },
		"DEDUPE_POSTGRES_DSN": func(v string) string { return v },
	} {
		t.Run(env, func(t *testing.T) {
			v := os.Getenv(env)
			if v == "" {
				if os.Getenv("DEDUPE_REQUIRE_SERVERS") != "" {
					require.Failf(t, "server not configured", "%s is unset", env)
				}
				t.Skipf("%s is unset", env)
			}
			killRun(t, store(v), rounds)
		})
	}
}

// killRun runs the kill test's rounds on store and checks each lane.
func killRun(t *testing.T, store string, rounds int) {
	plat := replytest.New(replytest.Config{Seed: uint64(time.Now().UnixNano()),
		Odds: replytest.Odds{Hang: 0.08, FailAfter: 0.08, FailBefore: 0.08, Reject: 0.04}})
	_, err := plat.Start()
	require.NoError(t, err)
	defer plat.Close()
	in := newInbox(fmt.Sprint(time.Now().UnixNano()), plat)
	srv := httptest.NewServer(in)
	defer srv.Close()
	cfg := killtest.Config{Test: "TestRepliesGateway", Rounds: rounds, Procs: 1, MaxDelay: 150 * time.Millisecond,
		Env: []string{envInbox + "=" + srv.URL, envPlatform + "=" + plat.URL(), envStore + "=" + store}}
	killtest.Run(t, cfg)
	in.finish()
	killtest.Finish(t, cfg)
	t.Logf("store %s, %d rounds; platform: %s", store, rounds, plat.Stats())
	for _, l := range lanes {
		in.check(t, l, plat)
	}
}

// delivery is a message of a lane, as the test (the platform's webhook side)
// keeps it.
type delivery struct {
	msg    inbound
	holder string   // the gateway it was last handed to ("" if none)
	nacked string   // the gateway that last nacked it
	acked  *outcome // the gateway's outcome, once acked
	sent   int      // times handed out
}

// inbox is the test's side of the webhook: it hands each lane's messages to
// the gateways and takes their acks. A message is handed out again when
// its gateway nacks it or another gateway asks (the rounds run one gateway
// at a time, so the earlier one is dead).
type inbox struct {
	run  string
	plat *replytest.Server

	mu        sync.Mutex
	lanes     map[string][]*delivery
	finishing bool
	acks      int
}

func newInbox(run string, plat *replytest.Server) *inbox {
	return &inbox{run: run, plat: plat, lanes: map[string][]*delivery{}}
}

// text is the reply the model gives to message id of lane.
func replyText(lane, id string) string { return "re: " + lane + " " + id }

// finish stops new messages: the lanes end once every message is acked.
func (in *inbox) finish() {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.finishing = true
}

// ServeHTTP serves POST /next?lane=L&gw=G (a delivery as JSON; 204: none now;
// 410: the lane is done) and POST /ack?lane=L&id=ID&gw=G with an outcome, or
// /nack (no body).
func (in *inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	lane, gw := r.URL.Query().Get("lane"), r.URL.Query().Get("gw")
	switch r.URL.Path {
	case "/next":
		d, done := in.next(lane, gw)
		switch {
		case done:
			w.WriteHeader(http.StatusGone)
		case d == nil:
			w.WriteHeader(http.StatusNoContent)
		default:
			_ = json.NewEncoder(w).Encode(d)
		}
	case "/ack", "/nack":
		var o *outcome
		if r.URL.Path == "/ack" {
			o = new(outcome)
			if err := json.NewDecoder(r.Body).Decode(o); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		in.settle(lane, r.URL.Query().Get("id"), gw, o)
	default:
		http.NotFound(w, r)
	}
}

// next picks the delivery for gateway gw on lane: a message held by a dead
// gateway (the rounds run one gateway at a time) or nacked by another
// first, else a new one; once finishing, no new ones, and the messages gw
// nacked are handed to it again.
func (in *inbox) next(lane, gw string) (*inbound, bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	var retry *delivery
	for _, d := range in.lanes[lane] {
		switch {
		case d.acked != nil, d.holder == gw:
		case d.holder == "" && d.nacked == gw:
			retry = cmp.Or(retry, d)
		default:
			d.holder, d.sent = gw, d.sent+1
			return &d.msg, false
		}
	}
	if in.finishing {
		if retry == nil {
			return nil, true
		}
		retry.holder, retry.sent = gw, retry.sent+1
		return &retry.msg, false
	}
	n := len(in.lanes[lane])
	id := fmt.Sprintf("%s-%d", in.run, n)
	d := &delivery{msg: inbound{ID: id, Chat: "chat-" + lane, Text: "message " + strconv.Itoa(n)}, holder: gw, sent: 1}
	in.lanes[lane] = append(in.lanes[lane], d)
	return &d.msg, false
}

// settle takes gateway gw's ack (o not nil) or nack of message id; a
// restart of the platform follows every 25th ack.
func (in *inbox) settle(lane, id, gw string, o *outcome) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, d := range in.lanes[lane] {
		if d.msg.ID != id || d.holder != gw || d.acked != nil {
			continue
		}
		if o == nil {
			d.holder, d.nacked = "", gw
			return
		}
		d.acked = o
		in.acks++
		if in.acks%25 == 0 {
			go func() { _ = in.plat.Restart() }()
		}
	}
}

// check asserts lane's promise over its messages, and logs its counts.
func (in *inbox) check(t *testing.T, l lane, plat *replytest.Server) {
	t.Helper()
	in.mu.Lock()
	defer in.mu.Unlock()
	var msgs, redelivered, resumed, dups, lost, reportedLost, reportedDup, unreportedLost, unreportedDup int
	for _, d := range in.lanes[l.name] {
		msgs++
		if !assert.NotNil(t, d.acked, "%s: message %s never acked", l.name, d.msg.ID) {
			continue
		}
		if d.sent > 1 {
			redelivered++
		}
		if d.acked.Resumed {
			resumed++
		}
		n := plat.Count(d.msg.Chat, replyText(l.name, d.msg.ID))
		if n == 0 {
			lost++
		}
		if n > 1 {
			dups += n - 1
		}
		if d.acked.MaybeLost {
			reportedLost++
		}
		if d.acked.MaybeDup {
			reportedDup++
		}
		if n == 0 && !d.acked.MaybeLost {
			unreportedLost++
		}
		if n > 1 && !d.acked.MaybeDup {
			unreportedDup++
		}
	}
	t.Logf("%-13s messages=%d redelivered=%d sent-then-killed-before-mark=%d duplicate replies=%d lost replies=%d reported possibly lost=%d reported possibly duplicated=%d",
		l.name, msgs, redelivered, resumed, dups, lost, reportedLost, reportedDup)
	assert.Positive(t, msgs, l.name)
	assert.Zero(t, unreportedLost, "%s: replies lost without a report", l.name)
	assert.Zero(t, unreportedDup, "%s: replies duplicated without a report", l.name)
	switch l.policy {
	case "": // a native token
		assert.Zero(t, dups, "%s: duplicate replies", l.name)
		assert.Zero(t, lost, "%s: lost replies", l.name)
	case "at-most-once":
		assert.Zero(t, dups, "%s: duplicate replies", l.name)
	case "at-least-once":
		assert.Zero(t, lost, "%s: lost replies", l.name)
	}
}

// TestRepliesGateway is a gateway child of TestRepliesKill: it takes the
// deliveries of every lane from the test and processes them, until it is
// killed, or (in the finishing round) until every lane is done.
func TestRepliesGateway(t *testing.T) {
	inboxURL := os.Getenv(envInbox)
	if inboxURL == "" {
		t.Skip("run by TestRepliesKill")
	}
	ctx := context.Background()
	st, _, err := openStore(ctx, os.Getenv(envStore))
	require.NoError(t, err)
	defer st.Close()
	d := dedupe.New(st, dedupe.WithLease(killLease))
	defer d.Close()
	gw := strconv.Itoa(os.Getpid())
	var wg sync.WaitGroup
	errs := make(chan error, len(lanes))
	for _, l := range lanes {
		g, err := newReplier(replierConfig{channel: l.name, platform: l.platform, policy: l.policy, store: st, d: d,
			platformURL: os.Getenv(envPlatform), timeout: 200 * time.Millisecond, lease: killLease, window: l.window,
			model: func(_ context.Context, in inbound) ([]byte, error) { return []byte(replyText(l.name, in.ID)), nil }})
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- gatewayLane(ctx, inboxURL, l.name, gw, g)
		}()
	}
	killtest.Ready()
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

// gatewayLane takes lane's deliveries from the inbox and processes them,
// acking each processed one, until the lane is done.
func gatewayLane(ctx context.Context, inboxURL, lane, gw string, g *replier) error {
	q := "?lane=" + lane + "&gw=" + gw
	for {
		resp, err := http.Post(inboxURL+"/next"+q, "", nil)
		if err != nil {
			return err
		}
		var in inbound
		status := resp.StatusCode
		if status == http.StatusOK {
			err = json.NewDecoder(resp.Body).Decode(&in)
		}
		resp.Body.Close()
		switch {
		case err != nil:
			return err
		case status == http.StatusGone:
			return nil
		case status == http.StatusNoContent: // every open message is ours or in a dead gateway's claim: later
			time.Sleep(20 * time.Millisecond)
			continue
		case status != http.StatusOK:
			return fmt.Errorf("inbox: status %d", status)
		}
		out, err := g.handle(ctx, in)
		verb := "/ack"
		body, _ := json.Marshal(out)
		if err != nil { // an unknown outcome, a refusal, a dead gateway's claim or lock: delivered again
			verb, body = "/nack", nil
		}
		resp, err = http.Post(inboxURL+verb+q+"&id="+in.ID, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if verb == "/nack" { // as a platform waits before redelivering
			time.Sleep(20 * time.Millisecond)
		}
	}
}
