// Command multibot shows cross-adapter correlation: three bots, connected
// through two adapters (OneBot v11 and icqq), sit in the same QQ group and each
// deliver the group's traffic to one gateway core, rendered the way their
// adapter does (different message ids, an image as an md5 or as a file name, a
// JSON card as text or as an object, mentions as numbers or strings), each with
// the platform's send time of the message.
//
// A [multibot.Dispatcher] observes every delivery with a
// [dedupe.EventCorrelator]. The chat and welcome handlers use normal routes, so
// they see each logical event once; the audit handler uses '!' routes and sees
// every copy. The bot a user mentions replies, otherwise the bot whose copy
// arrived first.
//
// The traffic is a fixed script played on a simulated clock, so the output is
// the same on every run:
//
//	go run ./examples/multibot
package main

import (
	"cmp"
	"context"
	"fmt"
	"log"
	"slices"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/multibot"
)

// The bots: two on OneBot v11, one on icqq.
var (
	bot111 = multibot.Bot{Adapter: "onebotv11", ID: "111"}
	bot222 = multibot.Bot{Adapter: "icqq", ID: "222"}
	bot333 = multibot.Bot{Adapter: "onebotv11", ID: "333"}
)

const group = "4242"

// copyOf is one bot's delivery of a logical event, after a delay.
type copyOf struct {
	bot   multibot.Bot
	delay time.Duration
	segs  []dedupe.Segment // this adapter's rendering; nil for notices
}

// logical is one thing that happened in the group.
type logical struct {
	at     time.Duration
	kind   string // "message" or "notice"
	user   string
	copies []copyOf
}

func text(s string) dedupe.Segment {
	return dedupe.Segment{Type: "text", Data: map[string]any{"text": s}}
}

func at(target any) dedupe.Segment {
	return dedupe.Segment{Type: "at", Data: map[string]any{"qq": target}}
}

func main() {
	start := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	now := start
	clock := func() time.Time { return now }

	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: clock})
	d := multibot.NewDispatcher(c, nil)
	for _, b := range []multibot.Bot{bot111, bot222, bot333} {
		d.Bots().Register(b.Adapter, b.ID)
	}
	handle(d)

	for _, a := range arrivals(start, script()) {
		now = start.Add(a.at)
		ev := a.ev
		fmt.Printf("t=%-6s %s/%s delivers a %s from %s\n", fmt.Sprintf("%.2fs", a.at.Seconds()), ev.Identity.Adapter, ev.Identity.BotID, ev.Kind, ev.UserID)
		if d.Bots().IsBotLoop(ev) {
			fmt.Printf("    dropped  sent by our bot %s: no handler runs\n", ev.UserID)
		}
		if err := d.Dispatch(context.Background(), ev); err != nil {
			log.Fatal(err)
		}
	}

	st := c.Stats()
	fmt.Printf("\n%d deliveries observed, %d marked duplicate, %d refused by send time, %d groups live, %d evicted\n", st.Observed, st.Duplicates, st.TimeRefused, st.Groups, st.Evicted)
}

// handle registers the chat, welcome and audit handlers.
func handle(d *multibot.Dispatcher) {
	d.Handle("message.group", multibot.EventHandlerFunc(func(_ context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
		reply := d.PickReplyBot(ev, obs)
		how := "quoting " + reply.MessageID
		if reply.MessageID == "" {
			how = "without a quote: its own copy has not arrived yet"
		}
		fmt.Printf("    chat     %s said %q; %s/%s replies, %s\n", ev.UserID, render(ev.Segments), reply.Adapter, reply.BotID, how)
		return nil
	}))
	d.Handle("notice.group_increase", multibot.EventHandlerFunc(func(_ context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
		reply := d.PickReplyBot(ev, obs)
		fmt.Printf("    welcome  %s joined; %s/%s greets them\n", ev.UserID, reply.Adapter, reply.BotID)
		return nil
	}))
	d.Handle("!message, !notice", multibot.EventHandlerFunc(func(_ context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
		verdict := "first copy"
		if obs.Duplicate {
			verdict = fmt.Sprintf("duplicate of %s/%s", obs.Primary.Adapter, obs.Primary.BotID)
		}
		fmt.Printf("    audit    %s/%s id=%s: %s\n", ev.Identity.Adapter, ev.Identity.BotID, quote(ev.Identity.MessageID), verdict)
		return nil
	}))
}

// script is what happens in the group.
func script() []logical {
	md5 := "9e107d9d372bb6826bd81d3542a419d6"
	card := map[string]any{"app": "com.tencent.miniapp", "ver": "1.0", "meta": map[string]any{"title": "Lunch poll", "id": 7}}
	return []logical{
		{0, "message", "20001", []copyOf{
			{bot111, 0, []dedupe.Segment{text("good morning")}},
			{bot222, 120 * time.Millisecond, []dedupe.Segment{text("good morning")}},
			{bot333, 250 * time.Millisecond, []dedupe.Segment{text("good morning")}},
		}},
		{2 * time.Second, "message", "20002", []copyOf{ // 111's copy comes first, but the user asked 222
			{bot111, 0, []dedupe.Segment{{Type: "reply", Data: map[string]any{"id": "88"}}, at(222), text(" weather in Shanghai?")}},
			{bot222, 90 * time.Millisecond, []dedupe.Segment{at("222"), text(" weather in Shanghai?")}},
		}},
		{4 * time.Second, "message", "20001", []copyOf{ // one picture: an md5, a file name, a URL
			{bot222, 0, []dedupe.Segment{{Type: "image", Data: map[string]any{"md5": strings.ToUpper(md5), "url": "https://gchat.qpic.cn/gchatpic_new/0/0-0-" + md5 + "/0"}}}},
			{bot111, 40 * time.Millisecond, []dedupe.Segment{{Type: "image", Data: map[string]any{"file": strings.ToUpper(md5) + ".jpg", "url": "https://multimedia.nt.qq.com.cn/download?fileid=9e107d&rkey=a1"}}}},
		}},
		{5 * time.Second, "message", "20003", []copyOf{ // one card: an object, and text with other layout
			{bot222, 0, []dedupe.Segment{{Type: "json", Data: map[string]any{"data": card}}}},
			{bot333, 60 * time.Millisecond, []dedupe.Segment{{Type: "json", Data: map[string]any{"data": "{\n  \"ver\": \"1.0\",\n  \"meta\": {\"id\": 7, \"title\": \"Lunch poll\"},\n  \"app\": \"com.tencent.miniapp\"\n}"}}}},
		}},
		{6 * time.Second, "message", "20003", []copyOf{{bot111, 0, []dedupe.Segment{text("+1")}}, {bot222, 30 * time.Millisecond, []dedupe.Segment{text("+1")}}}},
		{9 * time.Second, "message", "20003", []copyOf{ // said again; 333 missed the first, so only the send time tells its copy apart
			{bot222, 0, []dedupe.Segment{text("+1")}},
			{bot333, 40 * time.Millisecond, []dedupe.Segment{text("+1")}},
			{bot111, 50 * time.Millisecond, []dedupe.Segment{text("+1")}},
		}},
		{10 * time.Second, "message", "333", []copyOf{ // bot 333 speaks; the others must not answer it
			{bot111, 0, []dedupe.Segment{text("Weather in Shanghai: 12°C, cloudy")}},
			{bot222, 70 * time.Millisecond, []dedupe.Segment{text("Weather in Shanghai: 12°C, cloudy")}},
		}},
		{12 * time.Second, "notice", "30004", []copyOf{{bot222, 0, nil}, {bot111, 200 * time.Millisecond, nil}, {bot333, 260 * time.Millisecond, nil}}},
		{30 * time.Second, "message", "20001", []copyOf{ // the window of the first has ended
			{bot333, 0, []dedupe.Segment{text("good morning")}},
			{bot111, 80 * time.Millisecond, []dedupe.Segment{text("good morning")}},
		}},
	}
}

// arrival is one delivery and when it arrives.
type arrival struct {
	at time.Duration
	ev *dedupe.Event
}

// arrivals flattens the script into deliveries in arrival order.
func arrivals(start time.Time, script []logical) []arrival {
	var arrivals []arrival
	ids := map[multibot.Bot]int{}
	for i, l := range script {
		for _, cp := range l.copies {
			ev := &dedupe.Event{
				Kind:     l.kind,
				Identity: dedupe.Identity{Adapter: cp.bot.Adapter, BotID: cp.bot.ID, Timestamp: start.Add(l.at)},
				GroupID:  group,
				UserID:   l.user,
			}
			if l.kind == "message" {
				ids[cp.bot]++
				ev.MessageType, ev.Segments = "group", cp.segs
				ev.Identity.EventType = "message.group"
				ev.Identity.MessageID = fmt.Sprintf("%s-%d", cp.bot.ID, 1000*(i+1)+ids[cp.bot])
				if cp.bot.Adapter == "icqq" {
					ev.Identity.MessageID = fmt.Sprintf("icqq:%08x", 0x5eed0000+i*16+ids[cp.bot])
				}
			} else {
				ev.NoticeType, ev.SubType, ev.OperatorID = "group_increase", "approve", "20001"
				ev.Identity.EventType = "notice.group_increase"
			}
			arrivals = append(arrivals, arrival{l.at + cp.delay, ev})
		}
	}
	slices.SortStableFunc(arrivals, func(a, b arrival) int { return cmp.Compare(a.at, b.at) })
	return arrivals
}

// render writes a message's segments for the log.
func render(segs []dedupe.Segment) string {
	var b strings.Builder
	for _, s := range segs {
		switch s.Type {
		case "text":
			b.WriteString(fmt.Sprint(s.Data["text"]))
		case "at":
			fmt.Fprintf(&b, "@%v", s.Data["qq"])
		case "reply":
		default:
			fmt.Fprintf(&b, "[%s]", s.Type)
		}
	}
	return b.String()
}

func quote(id string) string {
	if id == "" {
		return "-"
	}
	return id
}
