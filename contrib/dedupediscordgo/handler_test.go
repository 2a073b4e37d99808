package dedupediscordgo_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/contrib/dedupediscordgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// probe counts its calls, notes whether two ever ran at once, fails its first
// calls while fail is above zero, and holds each call until hold is closed,
// if set.
type probe struct {
	calls, running, fail atomic.Int32
	overlapped           atomic.Bool
	entered              chan struct{}
	hold                 chan struct{} // nil: do not hold
}

var errHandler = errors.New("handler failed")

func newProbe() *probe { return &probe{entered: make(chan struct{}, 64)} }

func (p *probe) run() error {
	p.calls.Add(1)
	if p.running.Add(1) > 1 {
		p.overlapped.Store(true)
	}
	defer p.running.Add(-1)
	p.entered <- struct{}{}
	if p.hold != nil {
		<-p.hold
	}
	if p.fail.Add(-1) >= 0 {
		return errHandler
	}
	return nil
}

// events wraps p for messages and interactions, and reports the id of each
// event whose wrapped handler returned.
type events struct {
	handled chan string
}

func newEvents() *events { return &events{handled: make(chan string, 64)} }

func (e *events) messages(d *dedupe.Deduper, channel string, p *probe, opts ...dedupe.Option) func(*discordgo.Session, *discordgo.MessageCreate) {
	h := dedupediscordgo.MessageCreate(d, channel, func(*discordgo.Session, *discordgo.MessageCreate) error { return p.run() }, opts...)
	return func(s *discordgo.Session, m *discordgo.MessageCreate) {
		h(s, m)
		e.handled <- m.ID
	}
}

func (e *events) interactions(d *dedupe.Deduper, channel string, p *probe) func(*discordgo.Session, *discordgo.InteractionCreate) {
	h := dedupediscordgo.InteractionCreate(d, channel, func(*discordgo.Session, *discordgo.InteractionCreate) error { return p.run() })
	return func(s *discordgo.Session, i *discordgo.InteractionCreate) {
		h(s, i)
		e.handled <- i.ID
	}
}

func (e *events) next(t *testing.T) string {
	t.Helper()
	select {
	case id := <-e.handled:
		return id
	case <-time.After(20 * time.Second):
		require.Fail(t, "no handler returned")
		return ""
	}
}

// TestResumeReplay drops the connection after two events; the session
// resumes, and the gateway replays both: neither is handled again.
func TestResumeReplay(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	d := dedupe.New(nil)
	pm, pi := newProbe(), newProbe()
	e := newEvents()
	g.session(t, e.messages(d, "", pm), e.interactions(d, "", pi))

	g.send(t, "MESSAGE_CREATE", message("1001"))
	g.send(t, "INTERACTION_CREATE", interaction("2001"))
	assert.ElementsMatch(t, []string{"1001", "2001"}, []string{e.next(t), e.next(t)})

	g.drop()
	require.Equal(t, "RESUMED", g.wait(t))
	assert.ElementsMatch(t, []string{"1001", "2001"}, []string{e.next(t), e.next(t)}, "the replay reaches the handlers")
	g.send(t, "MESSAGE_CREATE", message("1002"))
	assert.Equal(t, "1002", e.next(t))

	assert.EqualValues(t, 2, pm.calls.Load(), "messages 1001 and 1002, once each")
	assert.EqualValues(t, 1, pi.calls.Load())
	assert.EqualValues(t, 2, d.Stats().Duplicates)
}

// TestFailureReleases fails the first delivery of a message: its replay after
// a RESUME is processed.
func TestFailureReleases(t *testing.T) {
	t.Parallel()
	g := newGateway(t)
	p := newProbe()
	p.fail.Store(1)
	e := newEvents()
	g.session(t, e.messages(dedupe.New(nil), "", p))

	g.send(t, "MESSAGE_CREATE", message("1001"))
	assert.Equal(t, "1001", e.next(t))
	g.drop()
	require.Equal(t, "RESUMED", g.wait(t))
	assert.Equal(t, "1001", e.next(t))
	assert.EqualValues(t, 2, p.calls.Load())
}

// TestTwoProcesses connects two sessions of one bot that share a store, as
// during a rolling deployment, and delivers a message to both while the first
// copy is processed: it is handled once, whether the second copy waits for
// the first's outcome (the default wait) or is dropped when its wait ends
// first; it runs again only if the first failed.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		opts      []dedupe.Option
		fail      int32
		wantCalls int32
	}{
		{"wait ends first, dropped", []dedupe.Option{dedupe.WithWait(time.Millisecond)}, 0, 1},
		{"default wait, owner succeeds", nil, 0, 1},
		{"default wait, owner fails", nil, 1, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := dedupe.New(nil)
			p := newProbe()
			p.hold = make(chan struct{})
			p.fail.Store(tc.fail)
			e := newEvents()
			g1, g2 := newGateway(t), newGateway(t)
			g1.session(t, e.messages(d, "", p, tc.opts...))
			g2.session(t, e.messages(d, "", p, tc.opts...))

			g1.send(t, "MESSAGE_CREATE", message("1001"))
			<-p.entered
			g2.send(t, "MESSAGE_CREATE", message("1001"))
			returned := 0
			if len(tc.opts) == 0 {
				require.Eventually(t, func() bool { return d.Stats().Waits == 1 },
					10*time.Second, time.Millisecond, "the second copy waits for the first")
			} else {
				assert.Equal(t, "1001", e.next(t), "the second copy returns once its wait ends")
				returned++
			}
			close(p.hold)
			for ; returned < 2; returned++ {
				e.next(t)
			}
			assert.Equal(t, tc.wantCalls, p.calls.Load())
			assert.False(t, p.overlapped.Load(), "two copies ran at once")
			s := d.Stats()
			t.Logf("discordgo, 2 processes, %s: 2 deliveries of one message; %d runs; %d processed, %d failed, %d in flight",
				tc.name, p.calls.Load(), s.Processed, s.Failed, s.InFlight)
		})
	}
}

// TestTwoBotsShareAStore delivers one guild message to two bots, with a
// channel each: both handle it.
func TestTwoBotsShareAStore(t *testing.T) {
	t.Parallel()
	d := dedupe.New(nil)
	pa, pb := newProbe(), newProbe()
	e := newEvents()
	ga, gb := newGateway(t), newGateway(t)
	ga.session(t, e.messages(d, "discord-a", pa))
	gb.session(t, e.messages(d, "discord-b", pb))
	for range 2 {
		ga.send(t, "MESSAGE_CREATE", message("1001"))
		e.next(t)
		gb.send(t, "MESSAGE_CREATE", message("1001"))
		e.next(t)
	}
	assert.EqualValues(t, 1, pa.calls.Load())
	assert.EqualValues(t, 1, pb.calls.Load(), "bot b's copy of the message is not bot a's")
}
