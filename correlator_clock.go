package dedupe

import (
	"math"
	"time"
)

// Times in a correlator are kept as durations, not as time.Time, so that a
// group fits the 256-byte allocation class: the clock's readings (arrivals and
// window ends) as durations since an epoch taken from the clock itself, and
// send times as durations since the Unix epoch.

// unsent is the send time of a delivery or group that has none.
const unsent = time.Duration(math.MinInt64)

// maxClockSpan is how far from its epoch the correlator reads its clock
// before it takes a new epoch: far enough that no window reaches it, near
// enough that a reading plus any window does not overflow.
const maxClockSpan = 100 * 365 * 24 * time.Hour

// unixEpoch is the origin of send times.
var unixEpoch = time.Unix(0, 0)

// since returns a reading of the clock as a duration since the correlator's
// epoch. The first reading is the epoch; a reading more than maxClockSpan
// from it (a clock that read the zero time and was set later, or jumped by
// years either way) ends every group and becomes the new epoch, so that no
// duration saturates whatever the clock reads. c.mu is held.
func (c *EventCorrelator) since(t time.Time) time.Duration {
	if !c.anchored {
		c.epoch, c.anchored = t, true
	}
	d := t.Sub(c.epoch)
	if d > maxClockSpan || d < -maxClockSpan {
		c.clear()
		c.epoch, d = t, 0
	}
	return d
}

// clear removes every group. c.mu is held.
func (c *EventCorrelator) clear() {
	for class := range c.fifo {
		for g := c.fifo[class].front; g != nil; g = c.fifo[class].front {
			c.remove(g)
		}
	}
}

// sendTime returns a send time as a duration since the Unix epoch, or unsent
// for the zero time and for times outside the years 1678 to 2262, which no
// platform sends.
func sendTime(ts time.Time) time.Duration {
	if ts.IsZero() {
		return unsent
	}
	d := ts.Sub(unixEpoch)
	if d == math.MinInt64 || d == math.MaxInt64 {
		return unsent // saturated: too far to compare
	}
	return d
}

// addSat returns a+b, or the largest or smallest duration if the sum
// overflows.
func addSat(a, b time.Duration) time.Duration {
	s := a + b
	switch {
	case b > 0 && s < a:
		return math.MaxInt64
	case b < 0 && s > a:
		return math.MinInt64
	}
	return s
}
