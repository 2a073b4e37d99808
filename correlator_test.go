package dedupe

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// corpusDir holds the shared multi-bot corpus and the reference verdicts; see
// ../shared/testdata/README.md.
var corpusDir = filepath.Join("..", "shared", "testdata", "correlator")

// corpusEvent is one delivery of the shared corpus.
type corpusEvent struct {
	at      time.Time
	logical int
	ev      *Event
}

// corpusLine is the JSON form of a corpus delivery.
type corpusLine struct {
	AtMS        int64     `json:"at_ms"`
	Kind        string    `json:"kind"`
	MessageType string    `json:"message_type"`
	NoticeType  string    `json:"notice_type"`
	RequestType string    `json:"request_type"`
	SubType     string    `json:"sub_type"`
	GroupID     string    `json:"group_id"`
	UserID      string    `json:"user_id"`
	OperatorID  string    `json:"operator_id"`
	Comment     string    `json:"comment"`
	Message     []Segment `json:"message"`
	Identity    struct {
		Adapter       string `json:"adapter"`
		BotID         string `json:"bot_id"`
		EventType     string `json:"event_type"`
		MessageID     string `json:"message_id"`
		NativeEventID string `json:"native_event_id"`
		Timestamp     int64  `json:"timestamp"`
	} `json:"identity"`
	Logical int `json:"_logical"`
}

// openCorpusFile opens a gzipped file of the shared corpus, skipping the test
// when the shared test data is absent.
func openCorpusFile(tb testing.TB, name string) io.Reader {
	tb.Helper()
	f, err := os.Open(filepath.Join(corpusDir, name))
	if errors.Is(err, os.ErrNotExist) {
		tb.Skipf("shared corpus absent: %s not found (the shared test data is not checked out next to the repository)", filepath.Join(corpusDir, name))
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { f.Close() })
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	return zr
}

// loadCorpus decodes the shared corpus the way an adapter would, numbers kept as
// json.Number.
func loadCorpus(tb testing.TB) []corpusEvent {
	tb.Helper()
	return decodeCorpus(tb, openCorpusFile(tb, "multibot-5k.jsonl.gz"))
}

// decodeCorpus decodes deliveries in the corpus format, one JSON object a line.
func decodeCorpus(tb testing.TB, r io.Reader) []corpusEvent {
	tb.Helper()
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var out []corpusEvent
	for {
		var l corpusLine
		err := dec.Decode(&l)
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatalf("corpus line %d: %v", len(out)+1, err)
		}
		ev := &Event{
			Kind: l.Kind,
			Identity: Identity{
				Adapter: l.Identity.Adapter, BotID: l.Identity.BotID, EventType: l.Identity.EventType,
				MessageID: l.Identity.MessageID, NativeEventID: l.Identity.NativeEventID,
				Timestamp: time.UnixMilli(l.Identity.Timestamp),
			},
			MessageType: l.MessageType, NoticeType: l.NoticeType, RequestType: l.RequestType, SubType: l.SubType,
			GroupID: l.GroupID, UserID: l.UserID, OperatorID: l.OperatorID, Comment: l.Comment,
			Segments: l.Message,
		}
		out = append(out, corpusEvent{at: time.UnixMilli(l.AtMS), logical: l.Logical, ev: ev})
	}
	return out
}

// loadReference reads the reference implementation's verdicts.
func loadReference(tb testing.TB) []bool {
	tb.Helper()
	var out []bool
	sc := bufio.NewScanner(openCorpusFile(tb, "multibot-5k.reference.jsonl.gz"))
	for sc.Scan() {
		var v struct {
			Duplicate *bool `json:"duplicate"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			tb.Fatal(err)
		}
		if v.Duplicate != nil {
			out = append(out, *v.Duplicate)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

// clock is a fake clock, safe for concurrent use.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Unix(1_700_000_000, 0)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestCorrelatorParity replays the shared corpus through a Router with the three
// bots registered, each delivery at its at_ms, and scores the duplicate flags
// against the ground truth and the reference implementation (Mioku 1.0.8's
// EventCorrelator), which misses 53 duplicates and makes no false merge.
// Set DEDUPE_CORRELATOR_FLAGS to a path to write the flags for
// ../shared/tools/score-correlator.
func TestCorrelatorParity(t *testing.T) {
	corpus := loadCorpus(t)
	ref := loadReference(t)
	if len(ref) != len(corpus) {
		t.Fatalf("%d reference verdicts for %d deliveries", len(ref), len(corpus))
	}

	clk := newClock()
	c := NewCorrelator(CorrelatorConfig{Now: clk.Now})
	r := NewRouter(c)
	for _, b := range []Bot{{"onebotv11", "111"}, {"icqq", "222"}, {"onebotv11", "333"}} {
		r.RegisterBot(b.Adapter, b.ID)
	}
	flags := make([]bool, 0, len(corpus))
	var seen *bool
	r.Handle("!message, !notice, !request", HandlerFunc(func(_ context.Context, _ *Event, obs Observation) error {
		*seen = obs.Duplicate
		return nil
	}))
	for i, d := range corpus {
		clk.Set(d.at)
		var dup bool
		dup = false
		seen = &dup
		if err := r.Dispatch(context.Background(), d.ev); err != nil {
			t.Fatalf("delivery %d: %v", i, err)
		}
		flags = append(flags, dup)
	}

	logical := map[int]bool{}
	var trueDups, missed, falseMerges, agree int
	for i, d := range corpus {
		truth := logical[d.logical]
		logical[d.logical] = true
		if truth {
			trueDups++
		}
		switch {
		case truth && !flags[i]:
			missed++
		case !truth && flags[i]:
			falseMerges++
		}
		if flags[i] == ref[i] {
			agree++
		}
	}
	st := c.Stats()
	t.Logf("deliveries=%d true_dups=%d missed=%d false_merges=%d agree_with_reference=%d/%d", len(corpus), trueDups, missed, falseMerges, agree, len(ref))
	t.Logf("stats: groups=%d observed=%d duplicates=%d evicted=%d (reference: groups 1589, observed 5000, duplicates 2169, evicted 0)", st.Groups, st.Observed, st.Duplicates, st.Evicted)
	if falseMerges != 0 {
		t.Errorf("false merges = %d, want 0", falseMerges)
	}
	if missed > 53 {
		t.Errorf("missed duplicates = %d, want at most the reference's 53", missed)
	}
	if st.Observed != uint64(len(corpus)) {
		t.Errorf("observed = %d, want %d", st.Observed, len(corpus))
	}

	if path := os.Getenv("DEDUPE_CORRELATOR_FLAGS"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		w := bufio.NewWriter(f)
		for _, dup := range flags {
			fmt.Fprintf(w, "{\"duplicate\": %t}\n", dup)
		}
		fmt.Fprintf(w, "{\"groups\": %d, \"observed\": %d, \"duplicates\": %d, \"evicted\": %d}\n", st.Groups, st.Observed, st.Duplicates, st.Evicted)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// delivery is one step of a correlator scenario: at offset from the start,
// bot delivers content under message id msg.
type delivery struct {
	at      time.Duration
	bot     string // "a1" is adapter a, bot 1
	msg     string
	content string // the text, or "notice:" + user id for a notice
	dup     bool   // want Observation.Duplicate
	primary string // want Primary as "bot/msg"
	parts   int    // want len(Participants)
}

func (d delivery) event() *Event {
	ev := &Event{Identity: Identity{Adapter: d.bot[:1], BotID: d.bot[1:], MessageID: d.msg, Timestamp: time.Unix(1_700_000_000, 0)}}
	if user, ok := strings.CutPrefix(d.content, "notice:"); ok {
		ev.Kind, ev.NoticeType, ev.GroupID, ev.UserID = "notice", "group_increase", "100", user
		return ev
	}
	ev.Kind, ev.MessageType, ev.GroupID, ev.UserID = "message", "group", "100", "20001"
	ev.Segments = []Segment{{Type: "text", Data: map[string]any{"text": d.content}}}
	return ev
}

func (p Participant) short() string { return p.Adapter + p.BotID + "/" + p.MessageID }

// TestCorrelatorRules checks windows, groups and the repeat rule step by step.
func TestCorrelatorRules(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		cfg   CorrelatorConfig
		steps []delivery
	}{
		{"copies from three bots", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{100 * time.Millisecond, "b2", "n1", "hi", true, "a1/m1", 2},
			{200 * time.Millisecond, "a3", "o1", "hi", true, "a1/m1", 3},
		}},
		{"different content is another group", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{0, "b2", "n1", "ho", false, "b2/n1", 1},
		}},
		{"message window boundary is inclusive", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{15 * s, "b2", "n1", "hi", true, "a1/m1", 2},
			{15*s + 1, "a3", "o1", "hi", false, "a3/o1", 1},
		}},
		{"window is fixed from the first arrival", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{10 * s, "b2", "n1", "hi", true, "a1/m1", 2},
			{20 * s, "a3", "o1", "hi", false, "a3/o1", 1},
			{21 * s, "b2", "n2", "hi", true, "a3/o1", 2},
		}},
		{"configured message window", CorrelatorConfig{MessageWindow: 2 * s}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{2 * s, "b2", "n1", "hi", true, "a1/m1", 2},
			{3 * s, "a3", "o1", "hi", false, "a3/o1", 1},
		}},
		{"notice window is 60 s, inclusive", CorrelatorConfig{}, []delivery{
			{0, "a1", "", "notice:7", false, "a1/", 1},
			{60 * s, "b2", "", "notice:7", true, "a1/", 2},
			{60*s + 1, "a3", "", "notice:7", false, "a3/", 1},
		}},
		{"genuine repeat is not a duplicate", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{100 * time.Millisecond, "b2", "n1", "hi", true, "a1/m1", 2},
			{3 * s, "a1", "m2", "hi", false, "a1/m2", 1},
			{3*s + 100*time.Millisecond, "b2", "n2", "hi", true, "a1/m2", 2},
		}},
		{"a copy joins the oldest group its bot is missing from", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{1 * s, "a1", "m2", "hi", false, "a1/m2", 1},
			{2 * s, "b2", "n1", "hi", true, "a1/m1", 2},
			{3 * s, "b2", "n2", "hi", true, "a1/m2", 2},
			{4 * s, "b2", "n3", "hi", false, "b2/n3", 1},
		}},
		{"same adapter, other bot is a copy", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{0, "a2", "m1", "hi", true, "a1/m1", 2},
		}},
		{"same bot id, other adapter is a copy", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{0, "b1", "m1", "hi", true, "a1/m1", 2},
		}},
		{"redelivery of the same message id is a duplicate", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{0, "b2", "n1", "hi", true, "a1/m1", 2},
			{1 * s, "a1", "m1", "hi", true, "a1/m1", 1},
			{2 * s, "b2", "n1", "hi", true, "a1/m1", 2},
		}},
		{"notices without ids: the same bot again is a redelivery", CorrelatorConfig{}, []delivery{
			{0, "a1", "", "notice:7", false, "a1/", 1},
			{1 * s, "a1", "", "notice:7", true, "a1/", 1},
		}},
		{"repeat after the window is new", CorrelatorConfig{}, []delivery{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{16 * s, "a1", "m2", "hi", false, "a1/m2", 1},
			{17 * s, "b2", "n2", "hi", true, "a1/m2", 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			start := clk.Now()
			tt.cfg.Now = clk.Now
			c := NewCorrelator(tt.cfg)
			var dups uint64
			for i, d := range tt.steps {
				clk.Set(start.Add(d.at))
				obs := c.Observe(d.event())
				if obs.Duplicate != d.dup || obs.Primary.short() != d.primary || len(obs.Participants) != d.parts {
					t.Errorf("step %d (%s %s at %v): got dup=%v primary=%s parts=%d, want dup=%v primary=%s parts=%d",
						i, d.bot, d.msg, d.at, obs.Duplicate, obs.Primary.short(), len(obs.Participants), d.dup, d.primary, d.parts)
				}
				if obs.Participants[0] != obs.Primary {
					t.Errorf("step %d: first participant %v is not the primary %v", i, obs.Participants[0], obs.Primary)
				}
				if d.dup {
					dups++
				}
			}
			if st := c.Stats(); st.Observed != uint64(len(tt.steps)) || st.Duplicates != dups || st.Evicted != 0 {
				t.Errorf("stats %+v, want observed %d, duplicates %d", st, len(tt.steps), dups)
			}
		})
	}
}

// TestCorrelatorParticipantsSnapshot checks that an observation's participants
// do not change when later copies arrive, and that the router's view does.
func TestCorrelatorParticipantsSnapshot(t *testing.T) {
	c := NewCorrelator(CorrelatorConfig{})
	var obs []Observation
	var evs []*Event
	for i, bot := range []string{"a1", "b2", "a3", "c4", "d5"} {
		ev := delivery{bot: bot, msg: fmt.Sprint("m", i), content: "hi"}.event()
		evs = append(evs, ev)
		obs = append(obs, c.Observe(ev))
	}
	for i, o := range obs {
		if len(o.Participants) != i+1 {
			t.Errorf("observation %d has %d participants, want %d", i, len(o.Participants), i+1)
		}
		for j, p := range o.Participants {
			if p.MessageID != fmt.Sprint("m", j) {
				t.Errorf("observation %d participant %d = %v", i, j, p)
			}
		}
	}
	if parts, _ := c.participants(evs[0]); len(parts) != 5 {
		t.Errorf("current participants of the first copy: %d, want 5", len(parts))
	}
}

// TestCorrelatorSameEvent checks that observing one *Event twice returns the
// first observation and counts nothing, and that a copy is a new delivery.
func TestCorrelatorSameEvent(t *testing.T) {
	c := NewCorrelator(CorrelatorConfig{})
	first := delivery{bot: "a1", msg: "m1", content: "hi"}.event()
	ev := delivery{bot: "b2", msg: "n1", content: "hi"}.event()
	if _, ok := c.Correlation(ev); ok {
		t.Fatal("Correlation of an unobserved event reports ok")
	}
	c.Observe(first)
	o1 := c.Observe(ev)
	before := c.Stats()
	o2 := c.Observe(ev)
	if !o1.Duplicate || !reflect.DeepEqual(o1, o2) {
		t.Errorf("second Observe = %+v, want the first %+v", o2, o1)
	}
	if after := c.Stats(); after != before {
		t.Errorf("second Observe changed stats: %+v -> %+v", before, after)
	}
	if got, ok := c.Correlation(ev); !ok || !reflect.DeepEqual(got, o1) {
		t.Errorf("Correlation = %+v, %v; want %+v, true", got, ok, o1)
	}
	if _, ok := NewCorrelator(CorrelatorConfig{}).Correlation(ev); ok {
		t.Error("another correlator reports a correlation")
	}
	cp := *ev // a copy is another delivery: the same bot and id, so a redelivery
	if _, ok := c.Correlation(&cp); ok {
		t.Error("a copy of an observed event reports a correlation")
	}
	c.Observe(&cp)
	if st := c.Stats(); st.Observed != before.Observed+1 {
		t.Errorf("observing a copy: observed %d, want %d", st.Observed, before.Observed+1)
	}
}

// TestCorrelatorOtherKinds checks that kinds other than message, notice and
// request are observed but never correlated.
func TestCorrelatorOtherKinds(t *testing.T) {
	c := NewCorrelator(CorrelatorConfig{})
	for i := range 3 {
		ev := &Event{Kind: "meta_event", Identity: Identity{Adapter: "a", BotID: "1", MessageID: fmt.Sprint(i)}}
		obs := c.Observe(ev)
		if obs.Duplicate || !obs.Key.IsZero() || obs.Primary.MessageID != fmt.Sprint(i) || len(obs.Participants) != 1 {
			t.Errorf("meta_event %d: %+v", i, obs)
		}
	}
	if st := c.Stats(); st.Observed != 3 || st.Groups != 0 || st.Duplicates != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestCorrelatorEviction checks MaxGroups: the oldest group by creation goes,
// across windows, in order, and a group renewed after its window is new.
func TestCorrelatorEviction(t *testing.T) {
	clk := newClock()
	start := clk.Now()
	at := func(d time.Duration) { clk.Set(start.Add(d)) }
	c := NewCorrelator(CorrelatorConfig{MaxGroups: 2, Now: clk.Now})
	obs := func(bot, msg, content string) Observation {
		return c.Observe(delivery{bot: bot, msg: msg, content: content}.event())
	}

	at(0)
	obs("a1", "", "notice:7") // notice group N, 60 s
	at(1 * time.Second)
	obs("a1", "x1", "x") // message group X
	at(17 * time.Second)
	if st := c.Stats(); st.Groups != 1 {
		t.Fatalf("after X's window: %d groups, want 1 (N)", st.Groups)
	}
	if o := obs("a1", "x2", "x"); o.Duplicate { // X renewed: newer than N
		t.Fatal("renewed X is a duplicate")
	}
	at(18 * time.Second)
	obs("a1", "y1", "y") // Y: a third group evicts the oldest, N
	if st := c.Stats(); st.Groups != 2 || st.Evicted != 1 {
		t.Fatalf("stats %+v, want 2 groups, 1 evicted", st)
	}
	at(19 * time.Second)
	if o := obs("b2", "x3", "x"); !o.Duplicate || o.Primary.MessageID != "x2" {
		t.Errorf("copy of renewed X: %+v, want a duplicate of x2", o)
	}
	if o := obs("b2", "", "notice:7"); o.Duplicate { // N was evicted: new group, evicting X
		t.Errorf("copy of evicted N is a duplicate: %+v", o)
	}
	if o := obs("b2", "y2", "y"); !o.Duplicate {
		t.Errorf("copy of Y is not a duplicate: %+v", o)
	}
	if o := obs("c3", "x4", "x"); o.Duplicate {
		t.Errorf("copy of evicted X is a duplicate: %+v", o)
	}
	if st := c.Stats(); st.Groups != 2 || st.Evicted != 3 {
		t.Errorf("stats %+v, want 2 groups, 3 evicted", st)
	}
}

// TestCorrelatorMaxGroups fills a correlator far beyond its cap.
func TestCorrelatorMaxGroups(t *testing.T) {
	const max, n = 64, 10000
	c := NewCorrelator(CorrelatorConfig{MaxGroups: max})
	for i := range n {
		c.Observe(delivery{bot: "a1", msg: fmt.Sprint(i), content: fmt.Sprint(i)}.event())
		if i%97 == 0 {
			checkInvariants(t, c)
		}
	}
	st := c.Stats()
	if st.Groups != max || st.Evicted != n-max || len(c.groups) != max {
		t.Errorf("stats %+v, map %d; want %d groups, %d evicted", st, len(c.groups), max, n-max)
	}
}

// TestCorrelatorDefaults checks the zero config.
func TestCorrelatorDefaults(t *testing.T) {
	c := NewCorrelator(CorrelatorConfig{MessageWindow: -1})
	if c.windows != [2]time.Duration{15 * time.Second, 60 * time.Second} || c.max != 4096 || c.now == nil {
		t.Errorf("defaults: windows %v, max %d", c.windows, c.max)
	}
}

// checkInvariants verifies the correlator's structure: every listed group is
// reachable from its key's chain, chains are in creation order, and counts
// agree.
func checkInvariants(t *testing.T, c *Correlator) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	listed := map[*group]bool{}
	for class := range c.fifo {
		var prev *group
		for g := c.fifo[class].front; g != nil; g = g.next {
			if g.prev != prev || g.class != class || (prev != nil && prev.seq >= g.seq) {
				t.Fatalf("list %d broken at group %d", class, g.seq)
			}
			listed[g] = true
			prev = g
		}
		if c.fifo[class].back != prev {
			t.Fatalf("list %d back is wrong", class)
		}
	}
	if len(listed) != c.n || c.n > c.max {
		t.Fatalf("%d groups listed, n = %d, max %d", len(listed), c.n, c.max)
	}
	chained := 0
	for k, head := range c.groups {
		var prev *group
		for g := head; g != nil; g = g.newer {
			if g.key != k || !listed[g] || (prev != nil && prev.seq >= g.seq) {
				t.Fatalf("chain of %v broken at group %d", k, g.seq)
			}
			chained++
			prev = g
		}
	}
	if chained != c.n {
		t.Fatalf("%d groups chained, %d listed", chained, c.n)
	}
}

// modelCorrelator states the correlator's rules as plainly as possible, with a
// scan of all groups: the specification the randomized test compares against.
type modelCorrelator struct {
	windows [2]time.Duration
	max     int
	groups  []*modelGroup // in creation order
	evicted int
}

type modelGroup struct {
	key     CorrelationKey
	expires time.Time
	parts   []Participant
}

func (m *modelCorrelator) observe(ev *Event, now time.Time) (dup bool, primary Participant) {
	class, _ := ev.windowClass()
	key := ev.CorrelationKey()
	self := ev.participant()
	live := m.groups[:0]
	for _, g := range m.groups {
		if !now.After(g.expires) {
			live = append(live, g)
		}
	}
	m.groups = live
	for _, g := range m.groups {
		if g.key != key {
			continue
		}
		i := slices.IndexFunc(g.parts, func(p Participant) bool { return p.Adapter == self.Adapter && p.BotID == self.BotID })
		if i < 0 {
			g.parts = append(g.parts, self)
			return true, g.parts[0]
		}
		if g.parts[i].MessageID == self.MessageID {
			return true, g.parts[0]
		}
	}
	m.groups = append(m.groups, &modelGroup{key: key, expires: now.Add(m.windows[class]), parts: []Participant{self}})
	if len(m.groups) > m.max {
		m.groups = m.groups[1:]
		m.evicted++
	}
	return false, self
}

// TestCorrelatorModel compares the correlator with the model on random traffic
// with a small content space, few bots, repeats, redeliveries, both windows and
// a small cap, checking the structure as it goes.
func TestCorrelatorModel(t *testing.T) {
	for seed := range uint64(20) {
		rnd := rand.New(rand.NewPCG(seed, 1))
		clk := newClock()
		maxGroups := 1 + rnd.IntN(12)
		c := NewCorrelator(CorrelatorConfig{MessageWindow: 3 * time.Second, EventWindow: 7 * time.Second, MaxGroups: maxGroups, Now: clk.Now})
		m := &modelCorrelator{windows: c.windows, max: maxGroups}
		for step := range 2000 {
			clk.Advance(time.Duration(rnd.IntN(800)) * time.Millisecond)
			content := fmt.Sprint(rnd.IntN(6))
			if rnd.IntN(5) == 0 {
				content = "notice:" + content
			}
			d := delivery{bot: []string{"a1", "a2", "b1", "c3"}[rnd.IntN(4)], msg: fmt.Sprint("m", rnd.IntN(4)), content: content}
			ev := d.event()
			wantDup, wantPrimary := m.observe(ev, clk.Now())
			obs := c.Observe(ev)
			if obs.Duplicate != wantDup || obs.Primary != wantPrimary {
				t.Fatalf("seed %d step %d (%+v): got dup=%v primary=%v, model dup=%v primary=%v",
					seed, step, d, obs.Duplicate, obs.Primary, wantDup, wantPrimary)
			}
			if step%50 == 0 {
				checkInvariants(t, c)
			}
		}
		if st := c.Stats(); st.Evicted != uint64(m.evicted) {
			t.Errorf("seed %d: evicted %d, model %d", seed, st.Evicted, m.evicted)
		}
	}
}

// TestCorrelatorConcurrent observes every logical event's copies from
// different goroutines at once, and some events from several goroutines at
// once: each logical event must have exactly one primary, and each *Event be
// counted once. Run with -race.
func TestCorrelatorConcurrent(t *testing.T) {
	const logical, bots = 2000, 4
	workers := 4 * runtime.GOMAXPROCS(0)
	c := NewCorrelator(CorrelatorConfig{})
	evs := make([][]*Event, logical)
	for i := range evs {
		for b := range bots {
			evs[i] = append(evs[i], delivery{bot: fmt.Sprint("a", b), msg: fmt.Sprint("m", i), content: fmt.Sprint("text ", i)}.event())
		}
	}
	var primaries [logical]atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range logical {
				b := (i + w) % bots
				if w >= bots && i%3 != 0 {
					continue // extra workers re-observe a third of the events
				}
				obs := c.Observe(evs[i][b])
				if !obs.Duplicate && w < bots {
					primaries[i].Add(1)
				}
				if _, ok := c.Correlation(evs[i][b]); !ok {
					t.Errorf("event %d/%d: no correlation after Observe", i, b)
				}
			}
		})
	}
	wg.Wait()
	for i := range primaries {
		if n := primaries[i].Load(); n != 1 {
			t.Fatalf("logical event %d has %d primaries", i, n)
		}
	}
	st := c.Stats()
	if st.Observed != logical*bots || st.Duplicates != logical*(bots-1) || st.Groups != logical {
		t.Errorf("stats %+v, want observed %d, duplicates %d, groups %d", st, logical*bots, logical*(bots-1), logical)
	}
	checkInvariants(t, c)
}

// TestObserveDuplicateAllocs proves the allocation bound of a duplicate
// delivery: at most 2, for the usual contents none.
func TestObserveDuplicateAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("allocation counts are distorted by -cover")
	}
	contents := map[string][]Segment{
		"text":      {{Type: "text", Data: map[string]any{"text": "help the what 收到 now test 😀 bot"}}},
		"long text": {{Type: "text", Data: map[string]any{"text": strings.Repeat("x", 2000)}}},
		"reply+at":  {{Type: "reply", Data: map[string]any{"id": "1"}}, {Type: "at", Data: map[string]any{"qq": json.Number("111")}}, {Type: "text", Data: map[string]any{"text": " hi"}}},
		"face":      {{Type: "face", Data: map[string]any{"id": 14.0}}, {Type: "text", Data: map[string]any{"text": "x"}}},
		"image-md5": {{Type: "image", Data: map[string]any{"file": strings.ToUpper(md5Hex) + ".jpg", "url": "https://multimedia.nt.qq.com.cn/download?fileid=dbb3746f0128&rkey=0.69"}}},
		"video":     {{Type: "video", Data: map[string]any{"file": "https://v.example/1.mp4"}}},
	}
	for name, content := range contents {
		t.Run(name, func(t *testing.T) {
			c := NewCorrelator(CorrelatorConfig{MaxGroups: 1 << 20})
			const runs = 200
			var dups []*Event
			for i := range runs + 1 {
				mk := func(bot, msg string) *Event {
					return &Event{Kind: "message", MessageType: "group", GroupID: fmt.Sprint(i), UserID: "2",
						Identity: Identity{Adapter: "a", BotID: bot, MessageID: msg}, Segments: content}
				}
				c.Observe(mk("1", "m"))
				dups = append(dups, mk("2", "n"))
			}
			i := 0
			allocs := testing.AllocsPerRun(runs, func() {
				if !c.Observe(dups[i]).Duplicate {
					t.Fatal("not a duplicate")
				}
				i++
			})
			t.Logf("%s: %.2f allocs per duplicate delivery", name, allocs)
			if allocs > 2 {
				t.Errorf("%s: %.2f allocs per duplicate delivery, want <= 2", name, allocs)
			}
		})
	}
}
