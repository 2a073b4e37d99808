package dedupe_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
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

// recorder is a comparable handler that records what it saw.
type recorder struct {
	mu   sync.Mutex
	name string
	saw  []string
	err  error
}

func (r *recorder) HandleEvent(_ context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.saw = append(r.saw, fmt.Sprintf("%s/%s dup=%v", ev.Identity.BotID, ev.Identity.MessageID, obs.Duplicate))
	return r.err
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.saw...)
}

func newRouter(t *testing.T) (*dedupe.Router, *dedupe.Correlator) {
	t.Helper()
	c := dedupe.NewCorrelator(dedupe.CorrelatorConfig{})
	r := dedupe.NewRouter(c)
	r.RegisterBot("onebotv11", "111")
	r.RegisterBot("icqq", "222")
	r.RegisterBot("onebotv11", "333")
	return r, c
}

func dispatch(t *testing.T, r *dedupe.Router, evs ...*dedupe.Event) {
	t.Helper()
	for _, ev := range evs {
		if err := r.Dispatch(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRouterRoutes checks route matching, duplicate filtering and '!' routes.
func TestRouterRoutes(t *testing.T) {
	r, _ := newRouter(t)
	handlers := map[string]*recorder{}
	for _, route := range []string{"message", "message.group", "message.private", "!message", "!message.group", "notice", "notice.group_increase", "!notice.group_decrease", "request.friend", "meta_event"} {
		h := &recorder{name: route}
		handlers[route] = h
		r.Handle(route, h)
	}
	dispatch(t, r,
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
		if got := handlers[route].got(); !reflect.DeepEqual(got, w) {
			t.Errorf("route %q saw %q, want %q", route, got, w)
		}
	}
}

// TestRouterOneRunPerHandler checks that a handler whose several routes match
// runs once, and in the order of its first registration.
func TestRouterOneRunPerHandler(t *testing.T) {
	r, _ := newRouter(t)
	var order []string
	mk := func(name string) dedupe.HandlerFunc {
		return func(context.Context, *dedupe.Event, dedupe.Observation) error {
			order = append(order, name)
			return nil
		}
	}
	same := &recorder{name: "same"}
	r.Handle("message", same)
	r.Handle("message.group, !message, notice", mk("list"))
	r.Handle("message.group", same)
	r.Handle("!message.group", same)
	f := mk("func")
	r.Handle("message", f)
	r.Handle("message.group", f) // a func cannot be compared: a second handler

	dispatch(t, r, groupMsg("onebotv11/111", "m1", "5", text("hi")), groupMsg("icqq/222", "n1", "5", text("hi")))
	if got, want := same.got(), []string{"111/m1 dup=false", "222/n1 dup=true"}; !reflect.DeepEqual(got, want) {
		t.Errorf("handler with three routes saw %q, want %q", got, want)
	}
	if want := []string{"list", "func", "func", "list"}; !reflect.DeepEqual(order, want) {
		t.Errorf("func handlers ran %q, want %q", order, want)
	}
}

// TestRouterNoCorrelator checks that without a correlator nothing is filtered.
func TestRouterNoCorrelator(t *testing.T) {
	r := dedupe.NewRouter(nil)
	r.RegisterBot("onebotv11", "111")
	r.RegisterBot("icqq", "222")
	h := &recorder{}
	r.Handle("message", h)
	loop := groupMsg("onebotv11/111", "x1", "222", text("from the other bot"))
	dispatch(t, r, groupMsg("onebotv11/111", "m1", "5", text("hi")), groupMsg("icqq/222", "n1", "5", text("hi")), loop)
	if got, want := h.got(), []string{"111/m1 dup=false", "222/n1 dup=false", "111/x1 dup=false"}; !reflect.DeepEqual(got, want) {
		t.Errorf("saw %q, want %q", got, want)
	}
	if r.Correlator() != nil {
		t.Error("Correlator() is not nil")
	}
	if got := r.PickReplyBot(groupMsg("icqq/222", "n2", "5", text("hi"))); got != (dedupe.Participant{Adapter: "icqq", BotID: "222", MessageID: "n2"}) {
		t.Errorf("PickReplyBot without correlator = %+v, want the receiving bot", got)
	}
}

// TestRouterBotLoop checks that messages from the gateway's other bots are
// dropped before any handler, after being observed.
func TestRouterBotLoop(t *testing.T) {
	r, c := newRouter(t)
	h := &recorder{}
	r.Handle("!message", h)
	loop := groupMsg("onebotv11/111", "x1", "222", text("from the other bot"))
	own := groupMsg("onebotv11/111", "x2", "111", text("my own message"))
	stranger := groupMsg("onebotv11/111", "x3", "444", text("from someone"))
	notice := &dedupe.Event{Kind: "notice", NoticeType: "group_increase", UserID: "222", Identity: dedupe.Identity{Adapter: "onebotv11", BotID: "111"}}
	r.Handle("notice", h)
	dispatch(t, r, loop, own, stranger, notice)
	if got, want := h.got(), []string{"111/x2 dup=false", "111/x3 dup=false", "111/ dup=false"}; !reflect.DeepEqual(got, want) {
		t.Errorf("saw %q, want %q", got, want)
	}
	if _, ok := c.Correlation(loop); !ok {
		t.Error("the dropped loop message was not observed")
	}
	for ev, want := range map[*dedupe.Event]bool{loop: true, own: false, stranger: false, notice: false} {
		if got := r.IsBotLoop(ev); got != want {
			t.Errorf("IsBotLoop(%s) = %v, want %v", ev.Identity.MessageID, got, want)
		}
	}
	r.UnregisterBot("icqq", "222")
	if r.IsBotLoop(loop) {
		t.Error("IsBotLoop after UnregisterBot")
	}
}

// TestRouterRegistry checks registration order, idempotence and mentions.
func TestRouterRegistry(t *testing.T) {
	r := dedupe.NewRouter(nil)
	r.RegisterBot("onebotv11", "333")
	r.RegisterBot("icqq", "222")
	r.RegisterBot("onebotv11", "111")
	r.RegisterBot("icqq", "222")
	r.RegisterBot("icqq", "111")
	want := []dedupe.Bot{{"onebotv11", "333"}, {"icqq", "222"}, {"onebotv11", "111"}, {"icqq", "111"}}
	if got := r.Bots(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Bots = %v, want %v", got, want)
	}
	ev := groupMsg("onebotv11/111", "m1", "5", at(111.0), text(" and "), at("333"), at(999), at("all"))
	if got, want := r.MentionedBots(ev), []dedupe.Bot{{"onebotv11", "333"}, {"onebotv11", "111"}, {"icqq", "111"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("MentionedBots = %v, want %v", got, want)
	}
	r.UnregisterBot("onebotv11", "333")
	r.UnregisterBot("nobody", "1")
	if got, want := r.MentionedBots(ev), []dedupe.Bot{{"onebotv11", "111"}, {"icqq", "111"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("MentionedBots after UnregisterBot = %v, want %v", got, want)
	}
	if got := r.MentionedBots(groupMsg("onebotv11/111", "m2", "5", text("@333"))); got != nil {
		t.Errorf("MentionedBots without at = %v", got)
	}
}

// TestPickReplyBot checks the choice of the bot that answers.
func TestPickReplyBot(t *testing.T) {
	p := func(bot, msg string) dedupe.Participant {
		adapter, id, _ := strings.Cut(bot, "/")
		return dedupe.Participant{Adapter: adapter, BotID: id, MessageID: msg}
	}
	t.Run("mentioned bot answers though another copy came first", func(t *testing.T) {
		r, _ := newRouter(t)
		first := groupMsg("onebotv11/111", "m1", "5", at(333), text(" hi"))
		second := groupMsg("onebotv11/333", "o1", "5", at("333"), text(" hi"))
		dispatch(t, r, first)
		if got, want := r.PickReplyBot(first), p("onebotv11/333", ""); got != want {
			t.Errorf("before 333's copy: %+v, want %+v", got, want)
		}
		dispatch(t, r, second)
		for _, ev := range []*dedupe.Event{first, second} {
			if got, want := r.PickReplyBot(ev), p("onebotv11/333", "o1"); got != want {
				t.Errorf("after 333's copy, for %s: %+v, want %+v", ev.Identity.MessageID, got, want)
			}
		}
	})
	t.Run("primary answers", func(t *testing.T) {
		r, _ := newRouter(t)
		first := groupMsg("icqq/222", "n1", "5", text("hi"))
		second := groupMsg("onebotv11/111", "m1", "5", text("hi"))
		dispatch(t, r, first, second)
		if got, want := r.PickReplyBot(second), p("icqq/222", "n1"); got != want {
			t.Errorf("%+v, want %+v", got, want)
		}
		if got, want := r.BotsForEvent(first), []dedupe.Participant{p("icqq/222", "n1"), p("onebotv11/111", "m1")}; !reflect.DeepEqual(got, want) {
			t.Errorf("BotsForEvent = %+v, want %+v", got, want)
		}
	})
	t.Run("unregistered primary gives way to the receiving bot", func(t *testing.T) {
		r, _ := newRouter(t)
		first := groupMsg("icqq/222", "n1", "5", text("hi"))
		second := groupMsg("onebotv11/111", "m1", "5", text("hi"))
		dispatch(t, r, first, second)
		r.UnregisterBot("icqq", "222")
		if got, want := r.PickReplyBot(second), p("onebotv11/111", "m1"); got != want {
			t.Errorf("%+v, want %+v", got, want)
		}
	})
	t.Run("mention of an unregistered bot is ignored", func(t *testing.T) {
		r, _ := newRouter(t)
		ev := groupMsg("onebotv11/111", "m1", "5", at(999), text("hi"))
		dispatch(t, r, ev)
		if got, want := r.PickReplyBot(ev), p("onebotv11/111", "m1"); got != want {
			t.Errorf("%+v, want %+v", got, want)
		}
	})
	t.Run("unobserved event", func(t *testing.T) {
		r, _ := newRouter(t)
		ev := groupMsg("icqq/222", "n1", "5", text("hi"))
		if got, want := r.PickReplyBot(ev), p("icqq/222", "n1"); got != want {
			t.Errorf("%+v, want %+v", got, want)
		}
		if got := r.BotsForEvent(ev); !reflect.DeepEqual(got, []dedupe.Participant{p("icqq/222", "n1")}) {
			t.Errorf("BotsForEvent = %+v", got)
		}
	})
}

// TestRouterErrors checks that handler errors are joined and wrapped, and that
// a done context stops the dispatch.
func TestRouterErrors(t *testing.T) {
	r, _ := newRouter(t)
	errA, errB := errors.New("a failed"), errors.New("b failed")
	a, b, ok := &recorder{err: errA}, &recorder{err: errB}, &recorder{}
	r.Handle("message.group", a)
	r.Handle("!message", b)
	r.Handle("message", ok)
	err := r.Dispatch(context.Background(), groupMsg("onebotv11/111", "m1", "5", text("hi")))
	if !errors.Is(err, errA) || !errors.Is(err, errB) {
		t.Fatalf("Dispatch error %v does not wrap both handler errors", err)
	}
	if !strings.Contains(err.Error(), "dedupe: route message.group: a failed") || !strings.Contains(err.Error(), "dedupe: route !message: b failed") {
		t.Errorf("error %q does not name the routes", err)
	}
	if len(ok.got()) != 1 {
		t.Error("a failing handler stopped the next one")
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = r.Dispatch(ctx, groupMsg("onebotv11/111", "m2", "5", text("ho")))
	if !errors.Is(err, context.Canceled) || len(ok.got()) != 1 {
		t.Errorf("cancelled Dispatch: %v, handler runs %d", err, len(ok.got()))
	}
	if err := r.Dispatch(ctx, &dedupe.Event{Kind: "meta_event"}); err != nil {
		t.Errorf("cancelled Dispatch with no matching route: %v", err)
	}
}

// TestRouterHandlePanics checks that malformed registrations panic.
func TestRouterHandlePanics(t *testing.T) {
	h := &recorder{}
	for _, route := range []string{"", " ", "!", ".group", "message.", "message,", "!!message", "message group"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%q) did not panic", route)
				}
			}()
			dedupe.NewRouter(nil).Handle(route, h)
		}()
	}
	defer func() {
		if recover() == nil {
			t.Error("Handle with a nil handler did not panic")
		}
	}()
	dedupe.NewRouter(nil).Handle("message", nil)
}

// TestRouterConcurrent dispatches from many goroutines while handlers and
// bots are registered. Run with -race.
func TestRouterConcurrent(t *testing.T) {
	r, c := newRouter(t)
	h := &recorder{}
	r.Handle("message", h)
	var wg sync.WaitGroup
	bots := []string{"onebotv11/111", "icqq/222", "onebotv11/333"}
	for w := range 3 { // one goroutine a bot, delivering the same 300 messages
		wg.Go(func() {
			for i := range 300 {
				ev := groupMsg(bots[w], fmt.Sprint(w, "-", i), "5", text(fmt.Sprint(i)))
				if err := r.Dispatch(context.Background(), ev); err != nil {
					t.Error(err)
				}
				r.PickReplyBot(ev)
				r.BotsForEvent(ev)
			}
		})
	}
	wg.Go(func() {
		for i := range 100 {
			r.RegisterBot("test", fmt.Sprint(i))
			r.Handle("!notice", &recorder{})
			r.UnregisterBot("test", fmt.Sprint(i))
		}
	})
	wg.Wait()
	if got := len(h.got()); got != 300 {
		t.Errorf("handler saw %d deliveries, want 300 (one per logical message)", got)
	}
	if st := c.Stats(); st.Observed != 900 || st.Duplicates != 600 || st.Groups != 300 {
		t.Errorf("stats %+v", st)
	}
}

// ExampleRouter shows two adapters delivering one group message: the normal route
// sees it once, the '!' route sees both copies, and the bot the user
// mentioned answers although another bot's copy came first.
func ExampleRouter() {
	c := dedupe.NewCorrelator(dedupe.CorrelatorConfig{})
	r := dedupe.NewRouter(c)
	r.RegisterBot("onebotv11", "111")
	r.RegisterBot("icqq", "222")

	r.Handle("message.group", dedupe.HandlerFunc(func(ctx context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
		bot := r.PickReplyBot(ev)
		fmt.Printf("command from %s via %s; reply as %s/%s\n", ev.UserID, ev.Identity.Adapter, bot.Adapter, bot.BotID)
		return nil
	}))
	r.Handle("!message", dedupe.HandlerFunc(func(ctx context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
		fmt.Printf("audit: %s/%s duplicate=%v\n", ev.Identity.Adapter, ev.Identity.MessageID, obs.Duplicate)
		return nil
	}))

	content := []dedupe.Segment{
		{Type: "at", Data: map[string]any{"qq": 222}},
		{Type: "text", Data: map[string]any{"text": " /weather"}},
	}
	for _, ev := range []*dedupe.Event{
		{Kind: "message", MessageType: "group", GroupID: "100", UserID: "20001", Segments: content,
			Identity: dedupe.Identity{Adapter: "onebotv11", BotID: "111", MessageID: "1841", Timestamp: time.Unix(1_700_000_000, 0)}},
		{Kind: "message", MessageType: "group", GroupID: "100", UserID: "20001", Segments: content,
			Identity: dedupe.Identity{Adapter: "icqq", BotID: "222", MessageID: "x-77", Timestamp: time.Unix(1_700_000_000, 0)}},
	} {
		if err := r.Dispatch(context.Background(), ev); err != nil {
			fmt.Println(err)
		}
	}
	// Output:
	// command from 20001 via onebotv11; reply as icqq/222
	// audit: onebotv11/1841 duplicate=false
	// audit: icqq/x-77 duplicate=true
}
