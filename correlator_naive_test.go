package dedupe_test

import (
	"time"

	"github.com/gatewaykit/dedupe"
)

// naiveCorrelator is the baseline: the reference implementation's design
// (Mioku's EventCorrelator) in Go. Groups live in a map keyed by the readable
// key string; while under the cap an insert is a map write, and once the cap is
// reached every insert scans all groups for expired ones and then for the
// oldest. Repeats from the same bot within the window count as duplicates, as
// in the reference. It uses the same canonical key as EventCorrelator, so the
// comparison measures the data structure.
type naiveCorrelator struct {
	now      func() time.Time
	windows  [2]time.Duration
	max      int
	groups   map[string]*naiveGroup
	observed int
	dups     int
	first    int // the number of the delivery that started the last group joined
}

type naiveGroup struct {
	created, expires time.Time
	parts            []dedupe.Participant
	first            int // the number of the delivery that started it, from 0
}

func newNaiveCorrelator(now func() time.Time, maxGroups int) *naiveCorrelator {
	return &naiveCorrelator{
		now:     now,
		windows: [2]time.Duration{(15 * time.Second), (60 * time.Second)},
		max:     maxGroups,
		groups:  map[string]*naiveGroup{},
	}
}

func (c *naiveCorrelator) Observe(ev *dedupe.Event) bool {
	class := 0
	switch ev.Kind {
	case "message":
	case "notice", "request":
		class = 1
	default:
		return false
	}
	key := ev.CanonicalForm()
	now := c.now()
	c.observed++
	if g, ok := c.groups[key]; ok && !now.After(g.expires) {
		g.parts = append(g.parts, naiveParticipant(ev))
		c.dups++
		c.first = g.first
		return true
	}
	if len(c.groups) >= c.max {
		for k, g := range c.groups { // scan for expired groups
			if now.After(g.expires) {
				delete(c.groups, k)
			}
		}
		if len(c.groups) >= c.max { // scan for the oldest
			var oldest string
			var t time.Time
			for k, g := range c.groups {
				if oldest == "" || g.created.Before(t) {
					oldest, t = k, g.created
				}
			}
			delete(c.groups, oldest)
		}
	}
	c.groups[key] = &naiveGroup{created: now, expires: now.Add(c.windows[class]), parts: []dedupe.Participant{naiveParticipant(ev)}, first: c.observed - 1}
	return false
}

func naiveParticipant(ev *dedupe.Event) dedupe.Participant {
	return dedupe.Participant{Adapter: ev.Identity.Adapter, BotID: ev.Identity.BotID, MessageID: ev.Identity.MessageID}
}
