package dedupe_test

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// corpusDir holds the shared multi-bot corpus and the reference verdicts; see
// ../shared/testdata/README.md.
var corpusDir = filepath.Join("..", "shared", "testdata", "correlator")

// corpusEvent is one delivery of the shared corpus.
type corpusEvent struct {
	at      time.Time
	logical int
	ev      *dedupe.Event
}

// corpusLine is the JSON form of a corpus delivery.
type corpusLine struct {
	AtMS        int64            `json:"at_ms"`
	Kind        string           `json:"kind"`
	MessageType string           `json:"message_type"`
	NoticeType  string           `json:"notice_type"`
	RequestType string           `json:"request_type"`
	SubType     string           `json:"sub_type"`
	GroupID     string           `json:"group_id"`
	UserID      string           `json:"user_id"`
	OperatorID  string           `json:"operator_id"`
	Comment     string           `json:"comment"`
	Message     []dedupe.Segment `json:"message"`
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
	require.NoError(tb, err)
	tb.Cleanup(func() { f.Close() })
	zr, err := gzip.NewReader(f)
	require.NoError(tb, err)
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
		require.NoError(tb, err, "corpus line %d", len(out)+1)
		ev := &dedupe.Event{
			Kind: l.Kind,
			Identity: dedupe.Identity{
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

// loadCorpusFile decodes a corpus written by gen-correlator-corpus, gzipped or
// not.
func loadCorpusFile(tb testing.TB, path string) []corpusEvent {
	f, err := os.Open(path)
	require.NoError(tb, err)
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(f)
		require.NoError(tb, err)
		r = zr
	}
	return decodeCorpus(tb, r)
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
		require.NoError(tb, json.Unmarshal(sc.Bytes(), &v))
		if v.Duplicate != nil {
			out = append(out, *v.Duplicate)
		}
	}
	require.NoError(tb, sc.Err())
	return out
}

// corpusScore counts a run's verdicts against the ground truth.
type corpusScore struct {
	trueDups, missed, falseMerges int
}

func scoreCorpus(corpus []corpusEvent, flags []bool) corpusScore {
	var s corpusScore
	logical := map[int]bool{}
	for i, d := range corpus {
		truth := logical[d.logical]
		logical[d.logical] = true
		if truth {
			s.trueDups++
		}
		switch {
		case truth && !flags[i]:
			s.missed++
		case !truth && flags[i]:
			s.falseMerges++
		}
	}
	return s
}

// replayCorpus observes every delivery at its at_ms and returns the duplicate
// flags and the final stats.
func replayCorpus(corpus []corpusEvent, cfg dedupe.CorrelatorConfig) ([]bool, dedupe.CorrelatorStats) {
	clk := dedupetest.NewClock(corpus[0].at)
	cfg.Now = clk.Now
	c := dedupe.NewEventCorrelator(cfg)
	flags := make([]bool, 0, len(corpus))
	for _, d := range corpus {
		clk.Set(d.at)
		flags = append(flags, c.Observe(d.ev).Duplicate)
	}
	return flags, c.Stats()
}

// replayNaive observes every delivery at its at_ms with the naive reference
// design, with the reference's cap of 4,096 groups, and returns its flags and,
// for each duplicate, the number of the delivery that started its group.
func replayNaive(corpus []corpusEvent) (flags []bool, firsts []int) {
	clk := dedupetest.NewClock(corpus[0].at)
	c := newNaiveCorrelator(clk.Now, 4096)
	for _, d := range corpus {
		clk.Set(d.at)
		dup := c.Observe(d.ev)
		flags = append(flags, dup)
		firsts = append(firsts, c.first)
	}
	return flags, firsts
}

// accidentalCatches counts the duplicates the correlator missed and the
// reference design flagged: legit when the reference's group was started by
// the same logical event, accidental when by another, that is, through a
// false merge.
func accidentalCatches(corpus []corpusEvent, ours, ref []bool, firsts []int) (legit, accidental int) {
	seen := map[int]bool{}
	for i, d := range corpus {
		truth := seen[d.logical]
		seen[d.logical] = true
		if !truth || ours[i] || !ref[i] {
			continue
		}
		if corpus[firsts[i]].logical == d.logical {
			legit++
		} else {
			accidental++
		}
	}
	return legit, accidental
}

// writeFlags writes verdicts in the format of ../shared/tools/score-correlator.
func writeFlags(tb testing.TB, path string, flags []bool, st dedupe.CorrelatorStats) {
	f, err := os.Create(path)
	require.NoError(tb, err)
	w := bufio.NewWriter(f)
	for _, dup := range flags {
		fmt.Fprintf(w, "{\"duplicate\": %t}\n", dup)
	}
	fmt.Fprintf(w, "{\"groups\": %d, \"observed\": %d, \"duplicates\": %d, \"evicted\": %d}\n", st.Groups, st.Observed, st.Duplicates, st.Evicted)
	require.NoError(tb, w.Flush())
	require.NoError(tb, f.Close())
}

// TestCorrelatorParity replays the shared corpus, each delivery at its at_ms,
// and scores the duplicate flags against the ground truth and the reference
// implementation (Mioku 1.0.8's EventCorrelator), which misses 53 duplicates
// and makes no false merge. Set DEDUPE_CORRELATOR_FLAGS to a path to write the
// flags for ../shared/tools/score-correlator.
func TestCorrelatorParity(t *testing.T) {
	corpus := loadCorpus(t)
	ref := loadReference(t)
	require.Len(t, ref, len(corpus), "reference verdicts")

	flags, st := replayCorpus(corpus, dedupe.CorrelatorConfig{})
	s := scoreCorpus(corpus, flags)
	agree := 0
	for i := range flags {
		if flags[i] == ref[i] {
			agree++
		}
	}
	t.Logf("deliveries=%d true_dups=%d missed=%d false_merges=%d agree_with_reference=%d/%d", len(corpus), s.trueDups, s.missed, s.falseMerges, agree, len(ref))
	t.Logf("stats: groups=%d observed=%d duplicates=%d evicted=%d (reference: groups 1589, observed 5000, duplicates 2169, evicted 0)", st.Groups, st.Observed, st.Duplicates, st.Evicted)
	naive, _ := replayNaive(corpus)
	naiveAgree := 0
	for i := range naive {
		if naive[i] == ref[i] {
			naiveAgree++
		}
	}
	t.Logf("the naive reference design in Go agrees with the reference on %d/%d", naiveAgree, len(ref))
	assert.Zero(t, s.falseMerges, "false merges")
	assert.LessOrEqual(t, s.missed, 53, "missed duplicates, at most the reference's 53")
	assert.EqualValues(t, len(corpus), st.Observed)
	if path := os.Getenv("DEDUPE_CORRELATOR_FLAGS"); path != "" {
		writeFlags(t, path, flags, st)
	}
}

// TestCorrelatorCorpusFile replays a corpus written by
// ../shared/tools/gen-correlator-corpus (gzipped or not), named by
// DEDUPE_CORRELATOR_CORPUS, through the correlator and through the naive
// reference design (the design of the reference implementation, which agrees
// with its verdicts on the shared corpus; see TestCorrelatorParity), logs
// both scores and the correlator's stats, and writes the flags to the paths
// in DEDUPE_CORRELATOR_FLAGS and DEDUPE_CORRELATOR_REFERENCE_FLAGS, if set,
// for ../shared/tools/score-correlator. It requires no false merge, and that
// every copy the reference design recognises through a group of its own
// logical event is recognised too. The reference design also flags some
// copies only because it merged a genuine repeat into the group of the
// earlier message (a url-only image rendering whose key no other copy of the
// repeat shares, say); those are logged, not required.
func TestCorrelatorCorpusFile(t *testing.T) {
	path := os.Getenv("DEDUPE_CORRELATOR_CORPUS")
	if path == "" {
		t.Skip("DEDUPE_CORRELATOR_CORPUS not set")
	}
	corpus := loadCorpusFile(t, path)
	flags, st := replayCorpus(corpus, dedupe.CorrelatorConfig{})
	naive, firsts := replayNaive(corpus)
	ours, ref := scoreCorpus(corpus, flags), scoreCorpus(corpus, naive)
	legit, accidental := accidentalCatches(corpus, flags, naive, firsts)
	t.Logf("%s: deliveries=%d true_dups=%d", path, len(corpus), ours.trueDups)
	t.Logf("correlator: missed=%d false_merges=%d; stats: groups=%d observed=%d duplicates=%d time_refused=%d evicted=%d",
		ours.missed, ours.falseMerges, st.Groups, st.Observed, st.Duplicates, st.TimeRefused, st.Evicted)
	t.Logf("reference design: missed=%d false_merges=%d", ref.missed, ref.falseMerges)
	t.Logf("missed by the correlator, flagged by the reference: %d through a group of the same event, %d only through a false merge", legit, accidental)
	if p := os.Getenv("DEDUPE_CORRELATOR_FLAGS"); p != "" {
		writeFlags(t, p, flags, st)
	}
	if p := os.Getenv("DEDUPE_CORRELATOR_REFERENCE_FLAGS"); p != "" {
		writeFlags(t, p, naive, dedupe.CorrelatorStats{})
	}
	assert.Zero(t, ours.falseMerges, "false merges")
	assert.Zero(t, legit, "copies the reference design recognises and the correlator misses")
}

// delivery is one delivery of a correlator scenario: bot delivers content
// under message id msg, sent at the given time.
type delivery struct {
	bot     string // "a1" is adapter a, bot 1
	msg     string
	content string        // the text, or "notice:" + user id for a notice
	sent    time.Duration // the send time, after 1,700,000,000 s, or unsent
}

// unsent is the send time of a delivery without one.
const unsent = time.Duration(math.MinInt64)

func (d delivery) event() *dedupe.Event {
	ev := &dedupe.Event{Identity: dedupe.Identity{Adapter: d.bot[:1], BotID: d.bot[1:], MessageID: d.msg}}
	if d.sent != unsent {
		ev.Identity.Timestamp = time.Unix(1_700_000_000, 0).Add(d.sent)
	}
	if user, ok := strings.CutPrefix(d.content, "notice:"); ok {
		ev.Kind, ev.NoticeType, ev.GroupID, ev.UserID = "notice", "group_increase", "100", user
		return ev
	}
	ev.Kind, ev.MessageType, ev.GroupID, ev.UserID = "message", "group", "100", "20001"
	ev.Segments = []dedupe.Segment{{Type: "text", Data: map[string]any{"text": d.content}}}
	return ev
}

func short(p dedupe.Participant) string { return p.Adapter + p.BotID + "/" + p.MessageID }

// newCorrelatorClock returns a fake clock at a fixed start.
func newCorrelatorClock() *dedupetest.Clock { return dedupetest.NewClock(time.Unix(1_700_000_000, 0)) }

// TestCorrelatorRules checks windows, groups and the repeat rule step by step.
func TestCorrelatorRules(t *testing.T) {
	const s = time.Second
	// ruleStep is a delivery at offset at from the start and the observation
	// it must give.
	type ruleStep struct {
		at      time.Duration
		bot     string
		msg     string
		content string
		dup     bool   // want Observation.Duplicate
		primary string // want Primary as "bot/msg"
		parts   int    // want len(Participants)
	}
	tests := []struct {
		name  string
		cfg   dedupe.CorrelatorConfig
		steps []ruleStep
	}{
		{"copies from three bots", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{100 * time.Millisecond, "b2", "n1", "hi", true, "a1/m1", 2},
			{200 * time.Millisecond, "a3", "o1", "hi", true, "a1/m1", 3},
		}},
		{"different content is another group", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{0, "b2", "n1", "ho", false, "b2/n1", 1},
		}},
		{"message window boundary is inclusive", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{15 * s, "b2", "n1", "hi", true, "a1/m1", 2},
			{15*s + 1, "a3", "o1", "hi", false, "a3/o1", 1},
		}},
		{"window is fixed from the first arrival", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{10 * s, "b2", "n1", "hi", true, "a1/m1", 2},
			{20 * s, "a3", "o1", "hi", false, "a3/o1", 1},
			{21 * s, "b2", "n2", "hi", true, "a3/o1", 2},
		}},
		{"configured message window", dedupe.CorrelatorConfig{MessageWindow: 2 * s}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{2 * s, "b2", "n1", "hi", true, "a1/m1", 2},
			{3 * s, "a3", "o1", "hi", false, "a3/o1", 1},
		}},
		{"notice window is 60 s, inclusive", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "", "notice:7", false, "a1/", 1},
			{60 * s, "b2", "", "notice:7", true, "a1/", 2},
			{60*s + 1, "a3", "", "notice:7", false, "a3/", 1},
		}},
		{"genuine repeat is not a duplicate", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{100 * time.Millisecond, "b2", "n1", "hi", true, "a1/m1", 2},
			{3 * s, "a1", "m2", "hi", false, "a1/m2", 1},
			{3*s + 100*time.Millisecond, "b2", "n2", "hi", true, "a1/m2", 2},
		}},
		{"a copy joins the oldest group its bot is missing from", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{1 * s, "a1", "m2", "hi", false, "a1/m2", 1},
			{2 * s, "b2", "n1", "hi", true, "a1/m1", 2},
			{3 * s, "b2", "n2", "hi", true, "a1/m2", 2},
			{4 * s, "b2", "n3", "hi", false, "b2/n3", 1},
		}},
		{"same adapter, other bot is a copy", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{0, "a2", "m1", "hi", true, "a1/m1", 2},
		}},
		{"same bot id, other adapter is a copy", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{0, "b1", "m1", "hi", true, "a1/m1", 2},
		}},
		{"redelivery of the same message id is a duplicate", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{0, "b2", "n1", "hi", true, "a1/m1", 2},
			{1 * s, "a1", "m1", "hi", true, "a1/m1", 1},
			{2 * s, "b2", "n1", "hi", true, "a1/m1", 2},
		}},
		{"notices without ids: the same bot again is a redelivery", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "", "notice:7", false, "a1/", 1},
			{1 * s, "a1", "", "notice:7", true, "a1/", 1},
		}},
		{"repeat after the window is new", dedupe.CorrelatorConfig{}, []ruleStep{
			{0, "a1", "m1", "hi", false, "a1/m1", 1},
			{16 * s, "a1", "m2", "hi", false, "a1/m2", 1},
			{17 * s, "b2", "n2", "hi", true, "a1/m2", 2},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newCorrelatorClock()
			start := clk.Now()
			tt.cfg.Now = clk.Now
			c := dedupe.NewEventCorrelator(tt.cfg)
			var dups uint64
			for i, d := range tt.steps {
				clk.Set(start.Add(d.at))
				obs := c.Observe(delivery{bot: d.bot, msg: d.msg, content: d.content}.event())
				got := fmt.Sprintf("dup=%v primary=%s parts=%d", obs.Duplicate, short(obs.Primary), len(obs.Participants))
				want := fmt.Sprintf("dup=%v primary=%s parts=%d", d.dup, d.primary, d.parts)
				assert.Equal(t, want, got, "step %d (%s %s at %v)", i, d.bot, d.msg, d.at)
				assert.Equal(t, obs.Primary, obs.Participants[0], "step %d: first participant is the primary", i)
				if d.dup {
					dups++
				}
			}
			st := c.Stats()
			assert.EqualValues(t, len(tt.steps), st.Observed)
			assert.Equal(t, dups, st.Duplicates)
			assert.Zero(t, st.Evicted)
		})
	}
}

// TestCorrelatorParticipants checks that an observation's participants do not
// change when later copies arrive, and that the group's current participants,
// from any of its observations, do.
func TestCorrelatorParticipants(t *testing.T) {
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	var obs []dedupe.Observation
	for i, bot := range []string{"a1", "b2", "a3", "c4", "d5"} {
		obs = append(obs, c.Observe(delivery{bot: bot, msg: fmt.Sprint("m", i), content: "hi"}.event()))
	}
	for i, o := range obs {
		require.Len(t, o.Participants, i+1, "observation %d", i)
		for j, p := range o.Participants {
			assert.Equal(t, fmt.Sprint("m", j), p.MessageID, "observation %d participant %d", i, j)
		}
		assert.Len(t, c.Participants(o), 5, "current participants from observation %d", i)
	}
	other := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	assert.Equal(t, obs[1].Participants, other.Participants(obs[1]), "another correlator gives the observation's own")
	assert.Empty(t, c.Participants(dedupe.Observation{}))
}

// TestCorrelatorTimeRule checks the send-time rule: a genuine repeat 2 to 9
// s later is not a duplicate even when a bot missed the original, copies whose
// send times are within the tolerance are, and deliveries without a send time
// keep the rule of ids and bots.
func TestCorrelatorTimeRule(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	type step struct {
		at   time.Duration
		bot  string
		msg  string
		sent time.Duration // or unsent
		want string        // "new" or the primary's bot/msg
	}
	tests := []struct {
		name    string
		cfg     dedupe.CorrelatorConfig
		refused uint64
		steps   []step
	}{
		{"repeat seconds later, one bot missed the original", dedupe.CorrelatorConfig{}, 1, []step{
			{0, "a1", "m1", 0, "new"},
			{100 * ms, "b2", "n1", 0, "a1/m1"},
			{5 * s, "a1", "m2", 5 * s, "new"},
			{5*s + 100*ms, "c3", "o2", 5 * s, "a1/m2"}, // c3 missed m1; its copy of m2 is refused by m1's group
			{5*s + 200*ms, "b2", "n2", 5 * s, "a1/m2"},
		}},
		{"the bot that missed the original delivers the repeat first", dedupe.CorrelatorConfig{}, 1, []step{
			{0, "a1", "m1", 0, "new"},
			{2 * s, "c3", "o2", 2 * s, "new"}, // refused by m1's group: starts m2's
			{2*s + 50*ms, "a1", "m2", 2 * s, "c3/o2"},
		}},
		{"repeat 9 s later", dedupe.CorrelatorConfig{}, 1, []step{
			{0, "a1", "m1", 0, "new"},
			{9 * s, "b2", "n2", 9 * s, "new"},
		}},
		{"copies with send times within the tolerance", dedupe.CorrelatorConfig{}, 3, []step{
			{0, "a1", "m1", 300 * ms, "new"},
			{100 * ms, "b2", "n1", 0, "a1/m1"},            // one adapter truncated to the second
			{200 * ms, "c3", "o1", 1300 * ms, "a1/m1"},    // another rounded up: 1 s from the group's
			{300 * ms, "d4", "p1", 1301 * ms, "new"},      // just past the tolerance
			{400 * ms, "e5", "q1", unsent, "a1/m1"},       // no send time: not compared
			{500 * ms, "b2", "n1", 9 * s, "a1/m1"},        // a redelivery is the same message, whatever its time
			{600 * ms, "f6", "r1", 1301 * ms, "d4/p1"},    // joins the group of its own time
			{700 * ms, "g7", "s1", -300 * ms, "a1/m1"},    // earlier is compared as later is
			{800 * ms, "h8", "t1", -1000*ms - 1, "new"},   // just past it, earlier
			{900 * ms, "h8", "t1", -1000*ms - 1, "h8/t1"}, // and its redelivery, not refused by the others
		}},
		{"a group takes the send time of its first delivery with one", dedupe.CorrelatorConfig{}, 1, []step{
			{0, "a1", "m1", unsent, "new"},
			{100 * ms, "b2", "n1", 0, "a1/m1"},
			{200 * ms, "c3", "o1", 3 * s, "new"},
		}},
		{"configured tolerance", dedupe.CorrelatorConfig{TimestampTolerance: 3 * s}, 1, []step{
			{0, "a1", "m1", 0, "new"},
			{100 * ms, "b2", "n1", 3 * s, "a1/m1"},
			{200 * ms, "c3", "o1", 3*s + 1, "new"},
		}},
		{"without message ids, a far send time is not a redelivery", dedupe.CorrelatorConfig{}, 1, []step{
			{0, "a1", "", 0, "new"},
			{100 * ms, "a1", "", 0, "a1/"},
			{4 * s, "a1", "", 4 * s, "new"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newCorrelatorClock()
			start := clk.Now()
			tt.cfg.Now = clk.Now
			c := dedupe.NewEventCorrelator(tt.cfg)
			for i, st := range tt.steps {
				clk.Set(start.Add(st.at))
				obs := c.Observe(delivery{bot: st.bot, msg: st.msg, content: "same text and image", sent: st.sent}.event())
				got := short(obs.Primary)
				if !obs.Duplicate {
					got = "new"
				}
				assert.Equal(t, st.want, got, "step %d (%s %s sent at %v)", i, st.bot, st.msg, st.sent)
			}
			assert.Equal(t, tt.refused, c.Stats().TimeRefused)
		})
	}
	t.Run("notices and requests by tolerance", func(t *testing.T) {
		const ms = time.Millisecond
		clk := newCorrelatorClock()
		start := clk.Now()
		c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: clk.Now})
		observe := func(at time.Duration, bot, content string, sent time.Duration) bool {
			clk.Set(start.Add(at))
			ev := delivery{bot: bot, content: content, sent: sent}.event()
			if strings.HasPrefix(content, "request:") {
				ev.Kind, ev.NoticeType, ev.RequestType, ev.Comment = "request", "", "friend", content
			}
			return c.Observe(ev).Duplicate
		}
		// One adapter truncates to the second, another rounds: 12.6 s is
		// 12 s to one and 13 s to the other (they used to be two keys).
		assert.False(t, observe(0, "a1", "notice:7", 12*time.Second))
		assert.True(t, observe(100*ms, "b2", "notice:7", 13*time.Second), "a copy straddling a second")
		assert.True(t, observe(200*ms, "a1", "notice:7", 12*time.Second), "a redelivery")
		assert.False(t, observe(5*time.Second, "a1", "notice:7", 17*time.Second), "the same notice again, 5 s later")
		assert.True(t, observe(5*time.Second+100*ms, "b2", "notice:7", 18*time.Second), "its copy")
		assert.True(t, observe(5*time.Second+200*ms, "c3", "notice:7", 17*time.Second), "a bot that missed the first: its copy of the second")
		assert.False(t, observe(0, "a1", "request:hi", 40*time.Second))
		assert.True(t, observe(300*ms, "b2", "request:hi", 41*time.Second), "a request's copy straddling a second")
		assert.False(t, observe(400*ms, "c3", "request:hi", 43*time.Second), "a request two seconds off")
		st := c.Stats()
		assert.EqualValues(t, 4, st.TimeRefused, "the second notice by a1, b2 and c3, and the request")
		require.NoError(t, dedupe.CheckCorrelatorInvariants(c))
	})
}

// TestCorrelatorManyBots checks a group larger than the correlator scans
// without an index: membership, redelivery and repeats, and Participant.
func TestCorrelatorManyBots(t *testing.T) {
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	const n = 100
	var obs []dedupe.Observation
	for i := range n {
		o := c.Observe(delivery{bot: fmt.Sprint("a", i), msg: fmt.Sprint("m", i), content: "hi"}.event())
		require.Equal(t, i > 0, o.Duplicate, "copy %d", i)
		require.Len(t, o.Participants, i+1)
		obs = append(obs, o)
	}
	re := c.Observe(delivery{bot: "a50", msg: "m50", content: "hi"}.event())
	assert.True(t, re.Duplicate, "redelivery")
	assert.Len(t, re.Participants, 51, "a redelivery's participants end at the copy it repeats")
	assert.False(t, c.Observe(delivery{bot: "a50", msg: "r50", content: "hi"}.event()).Duplicate, "a repeat by a bot of the group")
	for _, i := range []int{0, 7, 8, 9, 99} {
		p, ok := c.Participant(obs[0], "a", fmt.Sprint(i))
		assert.True(t, ok)
		assert.Equal(t, fmt.Sprint("m", i), p.MessageID)
	}
	_, ok := c.Participant(obs[0], "b", "1")
	assert.False(t, ok, "a bot that did not deliver")
	p, ok := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{}).Participant(obs[3], "a", "2")
	assert.True(t, ok, "another correlator looks in the observation")
	assert.Equal(t, "m2", p.MessageID)
	_, ok = dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{}).Participant(obs[3], "a", "4")
	assert.False(t, ok, "the observation ends at its own delivery")
	assert.Len(t, c.Participants(obs[0]), n)
}

// TestCorrelatorSameEvent checks that an Event is plain data: observing it
// again is a redelivery, counted again, and a copy of it or another correlator
// sees a delivery like any other.
func TestCorrelatorSameEvent(t *testing.T) {
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	first := delivery{bot: "a1", msg: "m1", content: "hi"}.event()
	ev := delivery{bot: "b2", msg: "n1", content: "hi"}.event()
	assert.False(t, c.Observe(first).Duplicate)
	o1 := c.Observe(ev)
	o2 := c.Observe(ev)
	assert.True(t, o1.Duplicate)
	assert.Equal(t, o1, o2, "observing an Event again is its redelivery")
	again := c.Observe(first)
	assert.True(t, again.Duplicate, "the primary observed again is a redelivery")
	assert.Equal(t, first.Identity.MessageID, again.Primary.MessageID)
	cp := *ev
	assert.Equal(t, o1.Participants, c.Observe(&cp).Participants, "a copy of an Event is the same delivery")
	st := c.Stats()
	assert.EqualValues(t, 5, st.Observed)
	assert.EqualValues(t, 4, st.Duplicates)
	assert.False(t, dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{}).Observe(ev).Duplicate, "another correlator")
}

// TestCorrelatorOtherKinds checks that kinds other than message, notice and
// request are observed but never correlated.
func TestCorrelatorOtherKinds(t *testing.T) {
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	for i := range 3 {
		ev := &dedupe.Event{Kind: "meta_event", Identity: dedupe.Identity{Adapter: "a", BotID: "1", MessageID: fmt.Sprint(i)}}
		obs := c.Observe(ev)
		assert.False(t, obs.Duplicate)
		assert.True(t, obs.Key.IsZero())
		assert.Equal(t, fmt.Sprint(i), obs.Primary.MessageID)
		assert.Len(t, obs.Participants, 1)
		assert.Equal(t, obs.Participants, c.Participants(obs))
	}
	st := c.Stats()
	assert.EqualValues(t, 3, st.Observed)
	assert.Zero(t, st.Groups)
	assert.Zero(t, st.Duplicates)
}

// TestCorrelatorEviction checks MaxGroups: the oldest group by creation goes,
// across windows, in order, and a group renewed after its window is new.
func TestCorrelatorEviction(t *testing.T) {
	clk := newCorrelatorClock()
	start := clk.Now()
	at := func(d time.Duration) { clk.Set(start.Add(d)) }
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{MaxGroups: 2, Now: clk.Now})
	obs := func(bot, msg, content string) dedupe.Observation {
		return c.Observe(delivery{bot: bot, msg: msg, content: content}.event())
	}

	at(0)
	obs("a1", "", "notice:7") // notice group N, 60 s
	at(1 * time.Second)
	obs("a1", "x1", "x") // message group X
	at(17 * time.Second)
	require.Equal(t, 1, c.Stats().Groups, "after X's window: only N")
	require.False(t, obs("a1", "x2", "x").Duplicate, "renewed X: newer than N")
	at(18 * time.Second)
	obs("a1", "y1", "y") // Y: a third group evicts the oldest, N
	st := c.Stats()
	require.Equal(t, 2, st.Groups)
	require.EqualValues(t, 1, st.Evicted)
	at(19 * time.Second)
	o := obs("b2", "x3", "x")
	assert.True(t, o.Duplicate, "copy of renewed X")
	assert.Equal(t, "x2", o.Primary.MessageID)
	assert.False(t, obs("b2", "", "notice:7").Duplicate, "N was evicted: new group, evicting X")
	assert.True(t, obs("b2", "y2", "y").Duplicate, "copy of Y")
	assert.False(t, obs("c3", "x4", "x").Duplicate, "copy of evicted X")
	st = c.Stats()
	assert.Equal(t, 2, st.Groups)
	assert.EqualValues(t, 3, st.Evicted)
}

// TestCorrelatorMaxGroups fills a correlator far beyond its cap.
func TestCorrelatorMaxGroups(t *testing.T) {
	const max, n = 64, 10000
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{MaxGroups: max})
	for i := range n {
		c.Observe(delivery{bot: "a1", msg: fmt.Sprint(i), content: fmt.Sprint(i)}.event())
		if i%97 == 0 {
			require.NoError(t, dedupe.CheckCorrelatorInvariants(c))
		}
	}
	st := c.Stats()
	_, _, keys := dedupe.CorrelatorSettings(c)
	assert.Equal(t, max, st.Groups)
	assert.EqualValues(t, n-max, st.Evicted)
	assert.Equal(t, max, keys)
}

// TestCorrelatorGroupSize keeps a group within the 256-byte allocation class,
// with room for three participants inline.
func TestCorrelatorGroupSize(t *testing.T) {
	assert.LessOrEqual(t, dedupe.GroupSize, uintptr(256))
}

// TestCorrelatorDefaults checks the zero config.
func TestCorrelatorDefaults(t *testing.T) {
	windows, maxGroups, _ := dedupe.CorrelatorSettings(dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{MessageWindow: -1}))
	assert.Equal(t, [2]time.Duration{15 * time.Second, 60 * time.Second}, windows)
	assert.Equal(t, 4096, maxGroups)
}

// modelCorrelator states the correlator's rules as plainly as possible, with a
// scan of all groups: the specification the randomized test compares against.
type modelCorrelator struct {
	windows   [2]time.Duration
	max       int
	tolerance time.Duration
	groups    []*modelGroup // in creation order
	evicted   int
	refused   int
}

type modelGroup struct {
	key     dedupe.CorrelationKey
	expires time.Time
	sent    time.Time
	parts   []dedupe.Participant
}

// sameTime is the time rule: both send times known and too far apart refuse.
func (m *modelCorrelator) sameTime(a, b time.Time) bool {
	return a.IsZero() || b.IsZero() || (a.Sub(b) <= m.tolerance && b.Sub(a) <= m.tolerance)
}

func (m *modelCorrelator) observe(ev *dedupe.Event, now time.Time) (dup bool, primary dedupe.Participant) {
	class := 0
	if ev.Kind != "message" {
		class = 1
	}
	key := ev.CorrelationKey()
	self := dedupe.Participant{Adapter: ev.Identity.Adapter, BotID: ev.Identity.BotID, MessageID: ev.Identity.MessageID}
	sent := ev.Identity.Timestamp
	m.groups = slices.DeleteFunc(m.groups, func(g *modelGroup) bool { return now.After(g.expires) })
	var chain []*modelGroup // the live groups of the key, oldest first
	for _, g := range m.groups {
		if g.key == key {
			chain = append(chain, g)
		}
	}
	botIn := func(g *modelGroup) int {
		return slices.IndexFunc(g.parts, func(p dedupe.Participant) bool { return p.Adapter == self.Adapter && p.BotID == self.BotID })
	}
	for _, g := range chain {
		if i := botIn(g); i >= 0 && self.MessageID != "" && g.parts[i].MessageID == self.MessageID {
			return true, g.parts[0] // a redelivery, whatever its time
		}
	}
	// A bot's deliveries of a key come in the order they were sent: only the
	// groups newer than the bot's newest are candidates.
	last := -1
	for j, g := range chain {
		if botIn(g) >= 0 {
			last = j
		}
	}
	refused := false
	if last >= 0 {
		g := chain[last]
		if self.MessageID == "" && g.parts[botIn(g)].MessageID == "" { // a redelivery without an id?
			if m.sameTime(g.sent, sent) {
				return true, g.parts[0]
			}
			refused = true
		}
	}
	for _, g := range chain[last+1:] {
		if !m.sameTime(g.sent, sent) {
			refused = true
			continue
		}
		g.parts = append(g.parts, self)
		if g.sent.IsZero() {
			g.sent = sent
		}
		if refused {
			m.refused++
		}
		return true, g.parts[0]
	}
	if refused {
		m.refused++
	}
	m.groups = append(m.groups, &modelGroup{key: key, expires: now.Add(m.windows[class]), sent: sent, parts: []dedupe.Participant{self}})
	if len(m.groups) > m.max {
		m.groups = m.groups[1:]
		m.evicted++
	}
	return false, self
}

// TestCorrelatorModel compares the correlator with the model on random traffic
// with a small content space, few bots (or, for half the seeds, twenty, so
// that groups are indexed by bot), send times near and far apart or missing,
// missing message ids, repeats, redeliveries, both windows and a small cap,
// checking the structure as it goes.
func TestCorrelatorModel(t *testing.T) {
	for seed := range uint64(20) {
		rnd := rand.New(rand.NewPCG(seed, 1))
		clk := newCorrelatorClock()
		maxGroups := 1 + rnd.IntN(12)
		windows := [2]time.Duration{3 * time.Second, 7 * time.Second}
		c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{MessageWindow: windows[0], EventWindow: windows[1], MaxGroups: maxGroups, Now: clk.Now})
		m := &modelCorrelator{windows: windows, max: maxGroups, tolerance: time.Second}
		bots := []string{"a1", "a2", "b1", "c3"}
		if seed >= 10 { // groups larger than the correlator scans without an index
			bots = nil
			for i := range 20 {
				bots = append(bots, fmt.Sprint("ab"[i%2:i%2+1], i))
			}
		}
		for step := range 2000 {
			clk.Advance(time.Duration(rnd.IntN(800)) * time.Millisecond)
			content := fmt.Sprint(rnd.IntN(6))
			if rnd.IntN(5) == 0 {
				content = "notice:" + content
			}
			d := delivery{bot: bots[rnd.IntN(len(bots))], msg: fmt.Sprint("m", rnd.IntN(4)), content: content}
			d.sent = []time.Duration{unsent, 0, 0, 700 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second}[rnd.IntN(7)]
			if rnd.IntN(8) == 0 {
				d.msg = "" // some adapters give no message id
			}
			ev := d.event()
			wantDup, wantPrimary := m.observe(ev, clk.Now())
			obs := c.Observe(ev)
			require.Equal(t, fmt.Sprint(wantDup, wantPrimary), fmt.Sprint(obs.Duplicate, obs.Primary), "seed %d step %d (%+v)", seed, step, d)
			if step%50 == 0 {
				require.NoError(t, dedupe.CheckCorrelatorInvariants(c))
			}
		}
		st := c.Stats()
		assert.EqualValues(t, m.evicted, st.Evicted, "seed %d", seed)
		assert.EqualValues(t, m.refused, st.TimeRefused, "seed %d", seed)
	}
}

// TestCorrelatorConcurrent observes every logical event's copies from
// different goroutines at once, and some events again from other goroutines:
// each logical event must have exactly one observation that is not a
// duplicate, and every observation be counted. Run with -race.
func TestCorrelatorConcurrent(t *testing.T) {
	const logical, bots = 2000, 4
	workers := max(4*runtime.GOMAXPROCS(0), bots+1)
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{})
	evs := make([][]*dedupe.Event, logical)
	for i := range evs {
		for b := range bots {
			evs[i] = append(evs[i], delivery{bot: fmt.Sprint("a", b), msg: fmt.Sprint("m", i), content: fmt.Sprint("text ", i)}.event())
		}
	}
	var primaries [logical]atomic.Int32
	var again atomic.Uint64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range logical {
				b := (i + w) % bots
				if w >= bots && i%3 != 0 {
					continue // extra workers observe a third of the events again
				}
				obs := c.Observe(evs[i][b])
				if w >= bots {
					again.Add(1)
				}
				if !obs.Duplicate {
					primaries[i].Add(1)
				}
				assert.NotEmpty(t, c.Participants(obs))
			}
		})
	}
	wg.Wait()
	for i := range primaries {
		require.EqualValues(t, 1, primaries[i].Load(), "primaries of logical event %d", i)
	}
	st := c.Stats()
	assert.Equal(t, logical*bots+again.Load(), st.Observed)
	assert.Equal(t, logical*(bots-1)+again.Load(), st.Duplicates)
	assert.Equal(t, logical, st.Groups)
	require.NoError(t, dedupe.CheckCorrelatorInvariants(c))
}

// TestObserveDuplicateAllocs proves the allocation bound of a duplicate
// delivery, with a send time or without: none for the usual contents, numeric
// mentions and captioned images (which the image rule applies to) included,
// and one for a text too long for the key's stack buffer.
func TestObserveDuplicateAllocs(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("allocation counts are distorted by -cover")
	}
	const md5Hex = "dbb3746f0128c88f07ceb6f23812f987"
	contents := map[string][]dedupe.Segment{
		"text":      {{Type: "text", Data: map[string]any{"text": "help the what 收到 now test 😀 bot"}}},
		"long text": {{Type: "text", Data: map[string]any{"text": strings.Repeat("x", 2000)}}},
		"reply+at":  {{Type: "reply", Data: map[string]any{"id": "1"}}, {Type: "at", Data: map[string]any{"qq": json.Number("111")}}, {Type: "text", Data: map[string]any{"text": " hi"}}},
		"face":      {{Type: "face", Data: map[string]any{"id": 14.0}}, {Type: "text", Data: map[string]any{"text": "x"}}},
		"image-md5": {{Type: "image", Data: map[string]any{"file": strings.ToUpper(md5Hex) + ".jpg", "url": "https://multimedia.nt.qq.com.cn/download?fileid=dbb3746f0128&rkey=0.69"}}},
		"caption+image": {{Type: "text", Data: map[string]any{"text": "look"}},
			{Type: "image", Data: map[string]any{"file": strings.ToUpper(md5Hex) + ".jpg", "url": "https://multimedia.nt.qq.com.cn/download?fileid=dbb3746f0128&rkey=0.69"}}},
		"video": {{Type: "video", Data: map[string]any{"file": "https://v.example/1.mp4"}}},
	}
	for name, content := range contents {
		for _, sent := range []time.Time{{}, time.Unix(1_700_000_000, 0)} {
			t.Run(fmt.Sprint(name, "/sent=", !sent.IsZero()), func(t *testing.T) { observeDuplicateAllocs(t, name, content, sent) })
		}
	}
}

// observeDuplicateAllocs checks the allocations of a duplicate delivery of
// content, sent at sent, by a bot of another adapter than the first copy's.
func observeDuplicateAllocs(t *testing.T, name string, content []dedupe.Segment, sent time.Time) {
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{MaxGroups: 1 << 20, Now: func() time.Time { return time.Unix(1_700_000_000, 0) }})
	const runs = 200
	var dups []*dedupe.Event
	for i := range runs + 1 {
		mk := func(adapter, bot, msg string) *dedupe.Event {
			return &dedupe.Event{Kind: "message", MessageType: "group", GroupID: fmt.Sprint(i), UserID: "2",
				Identity: dedupe.Identity{Adapter: adapter, BotID: bot, MessageID: msg, Timestamp: sent}, Segments: content}
		}
		c.Observe(mk("a", "1", "m"))
		dups = append(dups, mk("b", "2", "n"))
	}
	i := 0
	allocs := testing.AllocsPerRun(runs, func() {
		require.True(t, c.Observe(dups[i]).Duplicate, "not a duplicate")
		i++
	})
	t.Logf("%s: %.2f allocs per duplicate delivery", name, allocs)
	limit := 0.0
	if name == "long text" {
		limit = 1 // the canonical form outgrows its stack buffer
	}
	assert.LessOrEqual(t, allocs, limit, "%s: allocs per duplicate delivery", name)
}
