package dedupe

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBotIndexCollision checks that a bot whose hash another bot of the group
// has is found through the spill map, and the other still by its hash.
func TestBotIndexCollision(t *testing.T) {
	var parts []Participant
	for i := range linearParts + 2 {
		parts = append(parts, Participant{Adapter: "a", BotID: fmt.Sprint(i), MessageID: fmt.Sprint("m", i)})
	}
	x := &botIndex{byHash: map[uint64]int32{}}
	for i := range len(parts) - 1 {
		x.add(parts, i)
	}
	last := len(parts) - 1
	x.byHash[botHash("a", parts[last].BotID)] = 3 // as if bot 3's hash were the last bot's
	x.add(parts, last)
	assert.Equal(t, last, x.find(parts, "a", parts[last].BotID), "the colliding bot")
	assert.Equal(t, 3, x.find(parts, "a", "3"))
	assert.Equal(t, -1, x.find(parts, "a", "nobody"))
	assert.Equal(t, -1, x.find(parts, "b", "3"))
}
