package dedupe_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
)

// Renderings of one image by different adapters, as the shared corpus has
// them: icqq gives the md5 and a gchat URL with it; OneBot the md5 in the
// file name and an NTQQ URL, or only the NTQQ URL.
const (
	md5A, md5B = "dbb3746f0128c88f07ceb6f23812f987", "0123456789abcdef0123456789abcdef"
)

func icqqImage(md5 string) dedupe.Segment {
	return dedupe.Segment{Type: "image", Data: map[string]any{"md5": md5,
		"url": "https://gchat.qpic.cn/gchatpic_new/0/0-0-" + strings.ToUpper(md5) + "/0"}}
}

func onebotImage(md5, fileid string) dedupe.Segment {
	return dedupe.Segment{Type: "image", Data: map[string]any{"file": strings.ToUpper(md5) + ".jpg",
		"url": "https://multimedia.nt.qq.com.cn/download?fileid=" + fileid + "&rkey=0.1"}}
}

func urlOnlyImage(fileid string) dedupe.Segment {
	return dedupe.Segment{Type: "image", Data: map[string]any{"file": "image",
		"url": "https://Multimedia.NT.qq.com.cn:443/download?rkey=0.2&fileid=" + fileid + "&appid=1407"}}
}

func caption(s string) dedupe.Segment {
	return dedupe.Segment{Type: "text", Data: map[string]any{"text": s}}
}

// TestCorrelatorImageRule checks the image rule step by step: which copies
// whose keys differ only in how an image is named join a group, and which
// are refused.
func TestCorrelatorImageRule(t *testing.T) {
	const ms = time.Millisecond
	type step struct {
		bot, msg string
		segs     []dedupe.Segment
		sent     time.Duration // after 1,700,000,000 s; unsent for none
		want     string        // "new" or the primary's bot/msg
	}
	tests := []struct {
		name    string
		matched uint64 // want Stats.ImageMatched
		steps   []step
	}{
		{"a URL-only copy of a captioned image joins", 2, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), icqqImage(md5A)}, 0, "new"},
			{"b2", "n1", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 0, "a1/m1"},
			{"c3", "o1", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 500 * ms, "a1/m1"},
			{"b2", "n1", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 0, "a1/m1"}, // a redelivery
		}},
		{"a mention counts as a segment other than images", 1, []step{
			{"a1", "m1", []dedupe.Segment{{Type: "at", Data: map[string]any{"qq": "9"}}, onebotImage(md5A, "f1")}, 0, "new"},
			{"b2", "n1", []dedupe.Segment{{Type: "at", Data: map[string]any{"qq": 9}}, urlOnlyImage("f1")}, 0, "a1/m1"},
		}},
		{"images alone never join", 0, []step{
			{"a1", "m1", []dedupe.Segment{icqqImage(md5A)}, 0, "new"},
			{"b2", "n1", []dedupe.Segment{urlOnlyImage("f1")}, 0, "new"},
			{"c3", "o1", []dedupe.Segment{{Type: "reply", Data: map[string]any{"id": "1"}}, urlOnlyImage("f1")}, 0, "b2/n1"},
		}},
		{"two different digests refuse", 0, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), icqqImage(md5A)}, 0, "new"},
			{"b2", "n1", []dedupe.Segment{caption("look"), onebotImage(md5B, "f2")}, 0, "new"},
		}},
		{"two different URLs of one host refuse", 0, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 0, "new"},
			{"b2", "n1", []dedupe.Segment{caption("look"), urlOnlyImage("f2")}, 0, "new"},
		}},
		{"a URL the group saw from an exact copy refuses another", 0, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), icqqImage(md5A)}, 0, "new"},
			{"b2", "n1", []dedupe.Segment{caption("look"), onebotImage(md5A, "f1")}, 0, "a1/m1"}, // same key: the md5
			{"c3", "o1", []dedupe.Segment{caption("look"), urlOnlyImage("f9")}, 0, "new"},
		}},
		{"send times beyond the tolerance refuse", 0, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), icqqImage(md5A)}, 0, "new"},
			{"b2", "n1", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 1001 * ms, "new"},
		}},
		{"a missing send time refuses", 0, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), icqqImage(md5A)}, unsent, "new"},
			{"b2", "n1", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 0, "new"},
		}},
		{"a bot already in the group refuses: a second photo", 0, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), icqqImage(md5A)}, 0, "new"},
			{"a1", "m2", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 0, "new"},
		}},
		{"other content refuses", 0, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), icqqImage(md5A)}, 0, "new"},
			{"b2", "n1", []dedupe.Segment{caption("look!"), urlOnlyImage("f1")}, 0, "new"},
			{"c3", "o1", []dedupe.Segment{caption("look"), urlOnlyImage("f1"), urlOnlyImage("f2")}, 0, "new"},
		}},
		{"one adapter gives copies one send time: a second off is a repeat", 1, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), icqqImage(md5A)}, 8 * time.Second, "new"},
			{"b2", "n1", []dedupe.Segment{caption("look"), onebotImage(md5A, "f1")}, 8 * time.Second, "a1/m1"},
			{"c4", "p1", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 9 * time.Second, "a1/m1"}, // another adapter may round
			{"b3", "o1", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 9 * time.Second, "new"},
		}},
		{"a repeat joins its own group, not the first", 1, []step{
			{"a1", "m1", []dedupe.Segment{caption("look"), icqqImage(md5A)}, 0, "new"},
			{"b2", "n1", []dedupe.Segment{caption("look"), onebotImage(md5A, "f1")}, 0, "a1/m1"},
			{"a1", "m2", []dedupe.Segment{caption("look"), icqqImage(md5A)}, 5000 * ms, "new"},
			{"b2", "n2", []dedupe.Segment{caption("look"), urlOnlyImage("f1")}, 5000 * ms, "a1/m2"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newCorrelatorClock()
			c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: clk.Now})
			for i, st := range tt.steps {
				clk.Advance(100 * ms)
				ev := delivery{bot: st.bot, msg: st.msg, content: "", sent: st.sent}.event()
				ev.Segments = st.segs
				obs := c.Observe(ev)
				got := short(obs.Primary)
				if !obs.Duplicate {
					got = "new"
				}
				assert.Equal(t, st.want, got, "step %d (%s %s)", i, st.bot, st.msg)
			}
			assert.Equal(t, tt.matched, c.Stats().ImageMatched)
			require.NoError(t, dedupe.CheckCorrelatorInvariants(c))
		})
	}
}

// TestCorrelatorImageBounds checks the bounds of the image rule: a group
// remembers a bounded number of identities and then takes no copy by the
// rule, and many groups of one loose key cost a bounded walk.
func TestCorrelatorImageBounds(t *testing.T) {
	clk := newCorrelatorClock()
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: clk.Now, MaxGroups: 1 << 16})
	observe := func(bot, msg string, segs ...dedupe.Segment) bool {
		ev := delivery{bot: bot, msg: msg, sent: 0}.event()
		ev.Segments = segs
		return c.Observe(ev).Duplicate
	}
	// One sender, one caption, a thousand different photos in one second
	// from one bot: a thousand groups of one loose key.
	for i := range 1000 {
		require.False(t, observe("a1", fmt.Sprint("m", i), caption("look"), icqqImage(fmt.Sprintf("%032x", i))))
	}
	start := time.Now()
	for i := range 1000 {
		observe("b2", fmt.Sprint("n", i), caption("look"), urlOnlyImage(fmt.Sprint("f", i)))
	}
	t.Logf("%v per copy compared with a thousand groups of its loose key", time.Since(start)/1000)
	assert.Less(t, time.Since(start)/1000, 2*time.Millisecond)
	require.NoError(t, dedupe.CheckCorrelatorInvariants(c))
}

// imageOnlyCopies counts the true duplicates of a corpus that are messages of
// images alone, which the image rule never joins.
func imageOnlyCopies(corpus []corpusEvent) int {
	seen, n := map[int]bool{}, 0
	for _, d := range corpus {
		if seen[d.logical] && d.ev.Kind == "message" && imageOnly(d.ev.Segments) {
			n++
		}
		seen[d.logical] = true
	}
	return n
}

func imageOnly(segs []dedupe.Segment) bool {
	images := 0
	for _, s := range segs {
		switch s.Type {
		case "image":
			images++
		case "reply":
		default:
			return false
		}
	}
	return images > 0
}

// TestCorrelatorCommittedCorpora replays the corpora in testdata, written by
// ../shared/tools/gen-correlator-corpus:
//
//	correlator-mixed-rounding-3k: 3000 100 2406 300 0.1 --mixed-rounding
//	correlator-stress-3k:         3000 100 2407 300 0.1 --whole-seconds --drop 0.08 --image-bursts 0.1
//
// It requires no false merge (the exact rule of the correlator before the
// image rule made none on either: 64 and 59 missed), at most as many missed
// copies as there are copies of messages of images alone, and at most as
// many as the naive reference design misses.
func TestCorrelatorCommittedCorpora(t *testing.T) {
	for _, name := range []string{"correlator-mixed-rounding-3k.jsonl.gz", "correlator-stress-3k.jsonl.gz"} {
		t.Run(name, func(t *testing.T) {
			corpus := loadCorpusFile(t, filepath.Join("testdata", name))
			flags, st := replayCorpus(corpus, dedupe.CorrelatorConfig{})
			naive, _ := replayNaive(corpus)
			s, ref := scoreCorpus(corpus, flags), scoreCorpus(corpus, naive)
			images := imageOnlyCopies(corpus)
			t.Logf("true_dups=%d missed=%d false_merges=%d image_only_copies=%d image_matched=%d; reference design: missed=%d false_merges=%d",
				s.trueDups, s.missed, s.falseMerges, images, st.ImageMatched, ref.missed, ref.falseMerges)
			assert.Zero(t, s.falseMerges, "false merges")
			assert.LessOrEqual(t, s.missed, images, "missed, at most the copies of image-only messages")
			assert.LessOrEqual(t, s.missed, ref.missed, "missed, at most the reference design's")
		})
	}
}
