package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/migrate"
)

// progress draws a progress bar of a copy on a terminal, and nothing
// elsewhere.
type progress struct {
	w       io.Writer // nil: not a terminal
	total   int64     // live marks at the source when known, else 0
	started time.Time
	drawn   time.Time
}

// barEvery is the shortest time between two redraws.
const barEvery = 200 * time.Millisecond

// newProgress returns the progress bar for a copy from from, drawn on w if it
// is a terminal. Its total is the source's count of live marks, which takes
// one pass over a store that cannot count otherwise.
func newProgress(ctx context.Context, w io.Writer, from dedupe.Store) *progress {
	p := &progress{started: time.Now()}
	if !isTerminal(w) {
		return p
	}
	p.w = w
	if c, ok := from.(dedupe.Counter); ok {
		if marks, _, _, _, err := c.CountLive(ctx); err == nil {
			p.total = marks
		}
	}
	return p
}

// isTerminal reports whether w is a character device, such as a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// update redraws the bar with the counts so far.
func (p *progress) update(s migrate.Summary) {
	if p.w == nil || time.Since(p.drawn) < barEvery {
		return
	}
	p.drawn = time.Now()
	done := s.Listed
	rate := float64(done) / max(time.Since(p.started).Seconds(), 1e-3)
	const width = 30
	// The total counts the live marks; a copy also lists the expired ones,
	// so done may pass it: then the bar gives way to the count alone.
	if p.total > 0 && done <= p.total {
		frac := float64(done) / float64(p.total)
		n := int(frac * width)
		fmt.Fprintf(p.w, "\r[%s%s] %5.1f%% %d/%d marks, %.0f/s ", strings.Repeat("#", n), strings.Repeat(".", width-n),
			100*frac, done, p.total, rate)
		return
	}
	fmt.Fprintf(p.w, "\r%d marks, %.0f/s ", done, rate)
}

// finish ends the bar's line.
func (p *progress) finish() {
	if p.w != nil {
		fmt.Fprintln(p.w)
	}
}
