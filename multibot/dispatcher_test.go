package multibot_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/multibot"
)

// groupMsg is a group message from user in group 100 as received by bot.
func groupMsg(bot, msgID, user string, segs ...dedupe.Segment) *dedupe.Event {
	adapter, id, _ := strings.Cut(bot, "/")
	return &dedupe.Event{
		Kind:        "message",
		Identity:    dedupe.Identity{Adapter: adapter, BotID: id, EventType: "message.group", MessageID: msgID},
		MessageType: "group", GroupID: "100", UserID: user, Segments: segs,
	}
}

func text(s string) dedupe.Segment {
	return dedupe.Segment{Type: "text", Data: map[string]any{"text": s}}
}

func at(target any) dedupe.Segment {
	return dedupe.Segment{Type: "at", Data: map[string]any{"qq": target}}
}

// recorder is a comparable handler that records what it saw and the
// observations it was given, by event.
type recorder struct {
	mu  sync.Mutex
	saw []string
	obs map[*dedupe.Event]dedupe.Observation
	err error
}

func (r *recorder) HandleEvent(_ context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.saw = append(r.saw, fmt.Sprintf("%s/%s dup=%v", ev.Identity.BotID, ev.Identity.MessageID, obs.Duplicate))
	if r.obs == nil {
		r.obs = map[*dedupe.Event]dedupe.Observation{}
	}
	r.obs[ev] = obs
	return r.err
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.saw...)
}

// observation returns the observation the handler was given for ev.
func (r *recorder) observation(t *testing.T, ev *dedupe.Event) dedupe.Observation {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	obs, ok := r.obs[ev]
	require.True(t, ok, "no observation of %s", ev.Identity.MessageID)
	return obs
}

func newDispatcher(t *testing.T) (*multibot.Dispatcher, *dedupe.EventCorrelator) {
	t.Helper()
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	d := multibot.NewDispatcher(c, nil)
	d.Bots().Register("onebotv11", "111")
	d.Bots().Register("icqq", "222")
	d.Bots().Register("onebotv11", "333")
	return d, c
}

func dispatch(t *testing.T, d *multibot.Dispatcher, evs ...*dedupe.Event) {
	t.Helper()
	for _, ev := range evs {
		require.NoError(t, d.Dispatch(context.Background(), ev))
	}
}

// TestDispatcherRoutes checks route matching, duplicate filtering and '!'
// routes.
func TestDispatcherRoutes(t *testing.T) {
	d, _ := newDispatcher(t)
	handlers := map[string]*recorder{}
	for _, route := range []string{"message", "message.group", "message.private", "!message", "!message.group", "notice", "notice.group_increase", "!notice.group_decrease", "request.friend", "meta_event"} {
		h := &recorder{}
		handlers[route] = h
		d.Handle(route, h)
	}
	dispatch(t, d,
		groupMsg("onebotv11/111", "m1", "5", text("hi")),
		groupMsg("icqq/222", "n1", "5", text("hi")),
		&dedupe.Event{Kind: "notice", NoticeType: "group_increase", GroupID: "100", UserID: "6", Identity: dedupe.Identity{Adapter: "icqq", BotID: "222"}},
		&dedupe.Event{Kind: "notice", NoticeType: "group_increase", GroupID: "100", UserID: "6", Identity: dedupe.Identity{Adapter: "onebotv11", BotID: "111"}},
		&dedupe.Event{Kind: "request", RequestType: "friend", UserID: "7", Identity: dedupe.Identity{Adapter: "icqq", BotID: "222"}},
		&dedupe.Event{Kind: "meta_event", Identity: dedupe.Identity{Adapter: "icqq", BotID: "222", MessageID: "hb"}},
	)
	want := map[string][]string{
		"message":                {"111/m1 dup=false"},
		"message.group":          {"111/m1 dup=false"},
		"message.private":        nil,
		"!message":               {"111/m1 dup=false", "222/n1 dup=true"},
		"!message.group":         {"111/m1 dup=false", "222/n1 dup=true"},
		"notice":                 {"222/ dup=false"},
		"notice.group_increase":  {"222/ dup=false"},
		"!notice.group_decrease": nil,
		"request.friend":         {"222/ dup=false"},
		"meta_event":             {"222/hb dup=false"},
	}
	for route, w := range want {
		assert.Equal(t, w, handlers[route].got(), "route %q", route)
	}
}

// TestDispatcherOneRunPerHandler checks that a handler whose several routes
// match runs once, and in the order of its first registration.
func TestDispatcherOneRunPerHandler(t *testing.T) {
	d, _ := newDispatcher(t)
	var order []string
	mk := func(name string) multibot.EventHandlerFunc {
		return func(context.Context, *dedupe.Event, dedupe.Observation) error {
			order = append(order, name)
			return nil
		}
	}
	same := &recorder{}
	d.Handle("message", same)
	d.Handle("message.group, !message, notice", mk("list"))
	d.Handle("message.group", same)
	d.Handle("!message.group", same)
	f := mk("func")
	d.Handle("message", f)
	d.Handle("message.group", f) // a func cannot be compared: a second handler

	dispatch(t, d, groupMsg("onebotv11/111", "m1", "5", text("hi")), groupMsg("icqq/222", "n1", "5", text("hi")))
	assert.Equal(t, []string{"111/m1 dup=false", "222/n1 dup=true"}, same.got(), "handler with three routes")
	assert.Equal(t, []string{"list", "func", "func", "list"}, order, "func handlers")
}

// TestDispatcherNoCorrelator checks that without a correlator nothing is
// filtered.
func TestDispatcherNoCorrelator(t *testing.T) {
	d := multibot.NewDispatcher(nil, nil)
	d.Bots().Register("onebotv11", "111")
	d.Bots().Register("icqq", "222")
	h := &recorder{}
	d.Handle("message", h)
	loop := groupMsg("onebotv11/111", "x1", "222", text("from the other bot"))
	second := groupMsg("icqq/222", "n2", "5", text("hi"))
	dispatch(t, d, groupMsg("onebotv11/111", "m1", "5", text("hi")), groupMsg("icqq/222", "n1", "5", text("hi")), loop, second)
	assert.Equal(t, []string{"111/m1 dup=false", "222/n1 dup=false", "111/x1 dup=false", "222/n2 dup=false"}, h.got())
	assert.Nil(t, d.Correlator())
	obs := h.observation(t, second)
	assert.Equal(t, dedupe.Participant{Adapter: "icqq", BotID: "222", MessageID: "n2"}, d.PickReplyBot(second, obs), "PickReplyBot without correlator")
	assert.Equal(t, []dedupe.Participant{{Adapter: "icqq", BotID: "222", MessageID: "n2"}}, d.BotsForEvent(obs))
}

// TestDispatcherBotLoop checks that messages from the gateway's other bots are
// dropped before any handler, after being observed.
func TestDispatcherBotLoop(t *testing.T) {
	d, c := newDispatcher(t)
	h := &recorder{}
	d.Handle("!message", h)
	loop := groupMsg("onebotv11/111", "x1", "222", text("from the other bot"))
	own := groupMsg("onebotv11/111", "x2", "111", text("my own message"))
	stranger := groupMsg("onebotv11/111", "x3", "444", text("from someone"))
	notice := &dedupe.Event{Kind: "notice", NoticeType: "group_increase", UserID: "222", Identity: dedupe.Identity{Adapter: "onebotv11", BotID: "111"}}
	d.Handle("notice", h)
	dispatch(t, d, loop, own, stranger, notice)
	assert.Equal(t, []string{"111/x2 dup=false", "111/x3 dup=false", "111/ dup=false"}, h.got())
	assert.EqualValues(t, 4, c.Stats().Observed, "the dropped loop message was not observed")
	for ev, want := range map[*dedupe.Event]bool{loop: true, own: false, stranger: false, notice: false} {
		assert.Equal(t, want, d.Bots().IsBotLoop(ev), "IsBotLoop(%s)", ev.Identity.MessageID)
	}
	d.Bots().Unregister("icqq", "222")
	assert.False(t, d.Bots().IsBotLoop(loop), "IsBotLoop after Unregister")
}

// TestRegistry checks registration order, idempotence and mentions.
func TestRegistry(t *testing.T) {
	var r multibot.Registry // the zero value is ready to use
	assert.Empty(t, r.Bots())
	r.Register("onebotv11", "333")
	r.Register("icqq", "222")
	r.Register("onebotv11", "111")
	r.Register("icqq", "222")
	r.Register("icqq", "111")
	assert.Equal(t, []multibot.Bot{{"onebotv11", "333"}, {"icqq", "222"}, {"onebotv11", "111"}, {"icqq", "111"}}, r.Bots())
	assert.True(t, r.Contains("icqq", "111"))
	assert.False(t, r.Contains("icqq", "333"))
	ev := groupMsg("onebotv11/111", "m1", "5", at(111.0), text(" and "), at("333"), at(999), at("all"), at("111"))
	assert.Equal(t, []multibot.Bot{{"onebotv11", "333"}, {"onebotv11", "111"}, {"icqq", "111"}}, r.MentionedBots(ev))
	r.Unregister("onebotv11", "333")
	r.Unregister("nobody", "1")
	assert.Equal(t, []multibot.Bot{{"onebotv11", "111"}, {"icqq", "111"}}, r.MentionedBots(ev), "after Unregister")
	assert.Nil(t, r.MentionedBots(groupMsg("onebotv11/111", "m2", "5", text("@333"))), "without at")
	r.Register("onebotv11", "333")
	assert.Equal(t, []multibot.Bot{{"icqq", "222"}, {"onebotv11", "111"}, {"icqq", "111"}, {"onebotv11", "333"}}, r.Bots(), "registered again: last")
}

// TestPickReplyBot checks the choice of the bot that answers.
func TestPickReplyBot(t *testing.T) {
	p := func(bot, msg string) dedupe.Participant {
		adapter, id, _ := strings.Cut(bot, "/")
		return dedupe.Participant{Adapter: adapter, BotID: id, MessageID: msg}
	}
	setup := func(t *testing.T) (*multibot.Dispatcher, *recorder) {
		d, _ := newDispatcher(t)
		rec := &recorder{}
		d.Handle("!message", rec)
		return d, rec
	}
	t.Run("mentioned bot answers though another copy came first", func(t *testing.T) {
		d, rec := setup(t)
		first := groupMsg("onebotv11/111", "m1", "5", at(333), text(" hi"))
		second := groupMsg("onebotv11/333", "o1", "5", at("333"), text(" hi"))
		dispatch(t, d, first)
		assert.Equal(t, p("onebotv11/333", ""), d.PickReplyBot(first, rec.observation(t, first)), "before 333's copy")
		dispatch(t, d, second)
		for _, ev := range []*dedupe.Event{first, second} {
			assert.Equal(t, p("onebotv11/333", "o1"), d.PickReplyBot(ev, rec.observation(t, ev)), "after 333's copy, for %s", ev.Identity.MessageID)
		}
	})
	t.Run("primary answers", func(t *testing.T) {
		d, rec := setup(t)
		first := groupMsg("icqq/222", "n1", "5", text("hi"))
		second := groupMsg("onebotv11/111", "m1", "5", text("hi"))
		dispatch(t, d, first, second)
		assert.Equal(t, p("icqq/222", "n1"), d.PickReplyBot(second, rec.observation(t, second)))
		assert.Equal(t, []dedupe.Participant{p("icqq/222", "n1"), p("onebotv11/111", "m1")}, d.BotsForEvent(rec.observation(t, first)))
	})
	t.Run("unregistered primary gives way to the receiving bot", func(t *testing.T) {
		d, rec := setup(t)
		first := groupMsg("icqq/222", "n1", "5", text("hi"))
		second := groupMsg("onebotv11/111", "m1", "5", text("hi"))
		dispatch(t, d, first, second)
		d.Bots().Unregister("icqq", "222")
		assert.Equal(t, p("onebotv11/111", "m1"), d.PickReplyBot(second, rec.observation(t, second)))
	})
	t.Run("mention of an unregistered bot is ignored", func(t *testing.T) {
		d, rec := setup(t)
		ev := groupMsg("onebotv11/111", "m1", "5", at(999), text("hi"))
		dispatch(t, d, ev)
		assert.Equal(t, p("onebotv11/111", "m1"), d.PickReplyBot(ev, rec.observation(t, ev)))
	})
	t.Run("unobserved event", func(t *testing.T) {
		d, _ := setup(t)
		ev := groupMsg("icqq/222", "n1", "5", text("hi"))
		assert.Equal(t, p("icqq/222", "n1"), d.PickReplyBot(ev, dedupe.Observation{}))
		assert.Empty(t, d.BotsForEvent(dedupe.Observation{}))
	})
}

// TestDispatcherErrors checks that handler errors are joined and wrapped, and
// that a done context stops the dispatch.
func TestDispatcherErrors(t *testing.T) {
	d, _ := newDispatcher(t)
	errA, errB := errors.New("a failed"), errors.New("b failed")
	a, b, ok := &recorder{err: errA}, &recorder{err: errB}, &recorder{}
	d.Handle("message.group", a)
	d.Handle("!message", b)
	d.Handle("message", ok)
	err := d.Dispatch(context.Background(), groupMsg("onebotv11/111", "m1", "5", text("hi")))
	require.ErrorIs(t, err, errA)
	require.ErrorIs(t, err, errB)
	assert.Contains(t, err.Error(), "dedupe: multibot: route message.group: a failed")
	assert.Contains(t, err.Error(), "dedupe: multibot: route !message: b failed")
	assert.Len(t, ok.got(), 1, "a failing handler stopped the next one")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = d.Dispatch(ctx, groupMsg("onebotv11/111", "m2", "5", text("ho")))
	assert.ErrorIs(t, err, context.Canceled)
	assert.Len(t, ok.got(), 1, "handler ran after cancel")
	assert.NoError(t, d.Dispatch(ctx, &dedupe.Event{Kind: "meta_event"}), "cancelled Dispatch with no matching route")
}

// TestDispatcherHandlePanics checks that malformed registrations panic.
func TestDispatcherHandlePanics(t *testing.T) {
	h := &recorder{}
	for _, route := range []string{"", " ", "!", ".group", "message.", "message,", "!!message", "message group"} {
		assert.Panics(t, func() { multibot.NewDispatcher(nil, nil).Handle(route, h) }, "Handle(%q)", route)
	}
	assert.Panics(t, func() { multibot.NewDispatcher(nil, nil).Handle("message", nil) }, "nil handler")
}

// TestDispatcherConcurrent dispatches from many goroutines while handlers and
// bots are registered. Run with -race.
func TestDispatcherConcurrent(t *testing.T) {
	d, c := newDispatcher(t)
	h, all := &recorder{}, &recorder{}
	d.Handle("message", h)
	d.Handle("!message", all)
	var wg sync.WaitGroup
	bots := []string{"onebotv11/111", "icqq/222", "onebotv11/333"}
	for w := range 3 { // one goroutine a bot, delivering the same 300 messages
		wg.Go(func() {
			for i := range 300 {
				ev := groupMsg(bots[w], fmt.Sprint(w, "-", i), "20001", text(fmt.Sprint(i)))
				assert.NoError(t, d.Dispatch(context.Background(), ev))
				all.mu.Lock()
				obs, ok := all.obs[ev]
				all.mu.Unlock()
				assert.True(t, ok, "no observation of %s", ev.Identity.MessageID)
				d.PickReplyBot(ev, obs)
				d.BotsForEvent(obs)
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			d.Bots().Register("test", fmt.Sprint(i))
			d.Handle("!notice", &recorder{})
			d.Bots().Unregister("test", fmt.Sprint(i))
		}
	})
	wg.Wait()
	assert.Len(t, h.got(), 300, "one run per logical message")
	st := c.Stats()
	assert.EqualValues(t, 900, st.Observed)
	assert.EqualValues(t, 600, st.Duplicates)
	assert.Equal(t, 300, st.Groups)
}
