package dedupe

import (
	"fmt"
	"time"
	"unsafe"
)

// Internals of the correlator that the external tests check.

// CheckCorrelatorInvariants verifies c's structure: every listed group is
// reachable from its key's chain, chains and lists are in creation order, and
// counts agree.
func CheckCorrelatorInvariants(c *EventCorrelator) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	listed := map[*group]bool{}
	for class := range c.fifo {
		var prev *group
		for g := c.fifo[class].front; g != nil; g = g.next {
			if g.prev != prev || g.class != class || (prev != nil && prev.seq >= g.seq) {
				return fmt.Errorf("list %d broken at group %d", class, g.seq)
			}
			listed[g] = true
			prev = g
		}
		if c.fifo[class].back != prev {
			return fmt.Errorf("list %d back is wrong", class)
		}
	}
	if len(listed) != c.n || c.n > c.max {
		return fmt.Errorf("%d groups listed, n = %d, max %d", len(listed), c.n, c.max)
	}
	chained := 0
	for k, head := range c.groups {
		var prev *group
		for g := head; g != nil; g = g.newer {
			if g.key != k || !listed[g] || (prev != nil && prev.seq >= g.seq) {
				return fmt.Errorf("chain of %v broken at group %d", k, g.seq)
			}
			chained++
			prev = g
		}
	}
	if chained != c.n {
		return fmt.Errorf("%d groups chained, %d listed", chained, c.n)
	}
	if err := checkLooseChains(c, listed); err != nil {
		return err
	}
	return checkChainIndexes(c)
}

// checkLooseChains verifies that every group the image rule applies to is in
// the chain of its loose key, in creation order, and each chain's head knows
// its tail. c.mu is held.
func checkLooseChains(c *EventCorrelator, listed map[*group]bool) error {
	withImages, chained := 0, 0
	for g := range listed {
		if g.img != nil {
			withImages++
		}
	}
	for k, head := range c.loose {
		var prev *group
		for g := head; g != nil; g = g.img.newer {
			if !listed[g] || g.img.loose != k || (prev != nil && prev.seq >= g.seq) {
				return fmt.Errorf("loose chain of %v broken at group %d", k, g.seq)
			}
			chained++
			prev = g
		}
		if head.img.tail != prev {
			return fmt.Errorf("loose chain of %v: wrong tail", k)
		}
	}
	if chained != withImages {
		return fmt.Errorf("%d groups in loose chains, %d with images", chained, withImages)
	}
	return nil
}

// checkChainIndexes verifies that exactly the keys with more than one group
// have an index, and that each index finds its chain's tail, each bot's newest
// group and each delivery's group, and stays in proportion to the chain.
// c.mu is held.
func checkChainIndexes(c *EventCorrelator) error {
	indexed := 0
	for k, head := range c.groups {
		ci := c.chains[k]
		if (head.newer != nil) != (ci != nil) {
			return fmt.Errorf("key %v: chain of more than one group %v, indexed %v", k, head.newer != nil, ci != nil)
		}
		if ci == nil {
			continue
		}
		indexed++
		last, parts, tail := map[bot]*group{}, 0, head
		for g := head; g != nil; g = g.newer {
			for _, p := range g.parts {
				last[bot{p.Adapter, p.BotID}] = g
				if again, _, ok := ci.lookup(head, p, c.hashes(p)); p.MessageID != "" && (!ok || again != g) {
					return fmt.Errorf("key %v: delivery %v of group %d not found", k, p, g.seq)
				}
			}
			parts += len(g.parts)
			tail = g
		}
		for b, g := range last {
			if p := (Participant{Adapter: b.adapter, BotID: b.id}); !func() bool { _, found, ok := ci.lookup(head, p, c.hashes(p)); return ok && found == g }() {
				return fmt.Errorf("key %v: bot %v's newest group %d not found", k, b, g.seq)
			}
		}
		if ci.tail != tail || ci.parts != parts || len(ci.byMsg)+len(ci.last) > 4*parts+64 {
			return fmt.Errorf("key %v: index of %d deliveries, %d entries; chain of %d", k, ci.parts, len(ci.byMsg)+len(ci.last), parts)
		}
	}
	if indexed != len(c.chains) {
		return fmt.Errorf("%d chains indexed, %d in the map", indexed, len(c.chains))
	}
	return nil
}

// CorrelatorSettings returns the windows and cap c runs with, and the number
// of keys in its map.
func CorrelatorSettings(c *EventCorrelator) (windows [2]time.Duration, maxGroups, keys int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.windows, c.max, len(c.groups)
}

// GroupSize is the size of a correlation group, which is allocated for every
// logical event.
const GroupSize = unsafe.Sizeof(group{})

// MaxCanonicalSize is maxCanonicalSize, for the bounds tests.
const MaxCanonicalSize = maxCanonicalSize
