package dedupe_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupetest"
)

// TestCorrelatorClock checks that the correlator works with a clock started
// anywhere: one that reads the zero time when the correlator is made and is
// set later (every copy used to be missed: times saturated more than 292
// years from the origin, so every group had ended before its first copy),
// one that jumps by years either way, and one at the ends of time.Time. At
// each reading, a message's first delivery starts a group, its copies join it,
// a repeat 5 s later does not, and the window ends.
func TestCorrelatorClock(t *testing.T) {
	const year = 365 * 24 * time.Hour
	real := time.Unix(1_700_000_000, 0)
	years := func(n int) time.Time { return real.AddDate(n, 0, 0) }
	for name, readings := range map[string][]time.Time{
		"zero at construction, set later":    {time.Time{}, real},
		"zero throughout":                    {time.Time{}, time.Time{}.Add(time.Hour)},
		"jumps forward by ten years":         {real, real.Add(10 * year)},
		"jumps forward by three centuries":   {real, years(300)},
		"jumps back by three centuries":      {real, years(-300)},
		"from the zero time to the far end":  {time.Time{}, time.Unix(math.MaxInt64/4, 0)},
		"at the far end of time.Time":        {time.Unix(math.MaxInt64/4, 0), time.Unix(math.MaxInt64/4, 0).Add(time.Hour)},
		"before the Unix epoch, then after":  {time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC).Add(-year), real},
		"windows of the longest duration":    {real},
		"real clock jumping by a millennium": {years(1000), years(-1000), real},
	} {
		t.Run(name, func(t *testing.T) {
			clk := dedupetest.NewClock(readings[0])
			cfg := dedupe.CorrelatorConfig{Now: clk.Now}
			if name == "windows of the longest duration" {
				cfg.MessageWindow, cfg.EventWindow = math.MaxInt64, math.MaxInt64
			}
			c := dedupe.NewEventCorrelator(cfg)
			for r, start := range readings {
				clk.Set(start)
				sent := time.Duration(r) * time.Hour // send times are the platform's, not the clock's
				at := func(d time.Duration, bot, msg string, sent time.Duration) dedupe.Observation {
					clk.Set(start.Add(d))
					return c.Observe(delivery{bot: bot, msg: msg, content: "hello", sent: sent}.event())
				}
				step := fmt.Sprintf("reading %d (%v)", r, start)
				require.False(t, at(0, "a1", "m1", sent).Duplicate, "%s: first delivery", step)
				require.True(t, at(100*time.Millisecond, "b2", "n1", sent).Duplicate, "%s: a copy", step)
				require.True(t, at(200*time.Millisecond, "c3", "o1", unsent).Duplicate, "%s: a copy without a send time", step)
				require.False(t, at(5*time.Second, "a1", "m2", sent+5*time.Second).Duplicate, "%s: a repeat", step)
				require.True(t, at(5*time.Second+100*time.Millisecond, "b2", "n2", sent+5*time.Second).Duplicate, "%s: the repeat's copy", step)
				if cfg.MessageWindow == 0 {
					assert.False(t, at(30*time.Second, "c3", "o2", sent+5*time.Second).Duplicate, "%s: after the window", step)
				}
			}
			require.NoError(t, dedupe.CheckCorrelatorInvariants(c))
		})
	}
}

// TestCorrelatorSendTimes checks send times at the edges: the zero time and
// times outside what a duration since 1970 holds are not compared, and times
// on either side of the Unix epoch are.
func TestCorrelatorSendTimes(t *testing.T) {
	clk := newCorrelatorClock()
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: clk.Now})
	observe := func(bot, msg, text string, sent time.Time) bool {
		ev := delivery{bot: bot, msg: msg, content: text, sent: unsent}.event()
		ev.Identity.Timestamp = sent
		return c.Observe(ev).Duplicate
	}
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	assert.False(t, observe("a1", "m1", "far", far))
	assert.True(t, observe("b2", "n1", "far", far.Add(time.Hour)), "beyond 2262: not compared")
	assert.True(t, observe("c3", "o1", "far", time.Time{}), "zero: not compared")
	epoch := time.Unix(0, 0)
	assert.False(t, observe("a1", "m1", "epoch", epoch.Add(-500*time.Millisecond)))
	assert.True(t, observe("b2", "n1", "epoch", epoch.Add(400*time.Millisecond)), "across the Unix epoch")
	assert.False(t, observe("c3", "o1", "epoch", epoch.Add(2*time.Second)), "compared across it")
}

// TestCorrelatorClockCorpus replays the shared corpus with a clock that reads
// the zero time when the correlator is made: the verdicts are those of a
// clock started at the first delivery (every copy used to be missed).
func TestCorrelatorClockCorpus(t *testing.T) {
	corpus := loadCorpus(t)
	want, _ := replayCorpus(corpus, dedupe.CorrelatorConfig{})
	clk := dedupetest.NewClock(time.Time{})
	c := dedupe.NewEventCorrelator(dedupe.CorrelatorConfig{Now: clk.Now})
	got := make([]bool, 0, len(corpus))
	for _, d := range corpus {
		clk.Set(d.at)
		got = append(got, c.Observe(d.ev).Duplicate)
	}
	s := scoreCorpus(corpus, got)
	t.Logf("zero clock at construction: true_dups=%d missed=%d false_merges=%d", s.trueDups, s.missed, s.falseMerges)
	assert.Equal(t, want, got)
}
