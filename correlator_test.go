package dedupe

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
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
	dec := json.NewDecoder(openCorpusFile(tb, "multibot-5k.jsonl.gz"))
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

var _ = atomic.Int64{}
var _ = runtime.NumCPU
