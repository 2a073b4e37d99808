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
