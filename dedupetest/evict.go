package dedupetest

import (
	"testing"
	"time"

	"github.com/gatewaykit/dedupe"
)

// A store that evicts marks ([dedupe.Evicter]) counts every live mark it
// evicts: of marks all live, each one it no longer holds is counted, and it
// holds no more than MaxMarks. Run adds it for the stores that implement it.
func testEvicter(t *testing.T, s *suite) {
	// An hour, unscaled: nothing here may expire, however slow the server.
	const size = 200
	st := s.open(t, Options{MaxSize: size})
	ev := st.(dedupe.Evicter)
	if n := ev.MaxMarks(); n <= 0 || n > size {
		t.Fatalf("MaxMarks() = %d with Options.MaxSize %d", n, size)
	}
	before := ev.Evicted()
	keys := make([]dedupe.Key, 3*ev.MaxMarks())
	for i := range keys {
		keys[i] = s.key()
		mark(t, st, keys[i], time.Hour)
	}
	evicted := int(ev.Evicted() - before)
	held := 0
	for _, k := range keys {
		if exists(t, st, k) {
			held++
		}
	}
	if held > ev.MaxMarks() || held+evicted != len(keys) {
		t.Fatalf("%d live marks: %d held (MaxMarks %d), %d counted evicted; want every mark not held counted",
			len(keys), held, ev.MaxMarks(), evicted)
	}
}
