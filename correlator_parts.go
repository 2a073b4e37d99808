package dedupe

import "hash/maphash"

// linearParts is how many participants a group searches by scanning; a larger
// group indexes them by bot, so that finding a bot's delivery costs the same
// however many bots delivered the event.
const linearParts = 8

// botIndex is the index of a large group's participants by bot. It maps a
// seeded 64-bit hash of the bot to its position, checked against the
// participant there, so that the map holds no pointers for the garbage
// collector to scan and grows without hashing strings again; a bot whose hash
// another bot of the group has (a collision, which the check finds) is kept
// in spill.
type botIndex struct {
	byHash map[uint64]int32
	spill  map[bot]int32
}

// botSeed seeds the hashes of bot indexes.
var botSeed = maphash.MakeSeed()

func botHash(adapter, botID string) uint64 {
	return maphash.Comparable(botSeed, bot{adapter, botID})
}

// indexOf returns the index of the bot's delivery in the group, or -1.
func (g *group) indexOf(adapter, botID string) int {
	if g.index != nil {
		return g.index.find(g.parts, adapter, botID)
	}
	for i := range g.parts {
		if g.parts[i].BotID == botID && g.parts[i].Adapter == adapter {
			return i
		}
	}
	return -1
}

// add appends a delivery by a bot new to the group. Past linearParts the
// participants' array doubles when full, where append would grow a large one
// by a quarter: a group of many bots copies and clears each participant about
// twice instead of five times.
func (g *group) add(p Participant) {
	if n := len(g.parts); n == cap(g.parts) && n > linearParts {
		parts := make([]Participant, n, 2*n)
		copy(parts, g.parts)
		g.parts = parts
	}
	g.parts = append(g.parts, p)
	switch n := len(g.parts); {
	case g.index != nil:
		g.index.add(g.parts, n-1)
	case n > linearParts:
		g.index = &botIndex{byHash: make(map[uint64]int32, 2*n)}
		for i := range g.parts {
			g.index.add(g.parts, i)
		}
	}
}

// find returns the position of the bot's delivery in parts, or -1.
func (x *botIndex) find(parts []Participant, adapter, botID string) int {
	if i, ok := x.byHash[botHash(adapter, botID)]; ok && parts[i].BotID == botID && parts[i].Adapter == adapter {
		return int(i)
	}
	if x.spill != nil {
		if i, ok := x.spill[bot{adapter, botID}]; ok {
			return int(i)
		}
	}
	return -1
}

// add indexes parts[i], whose bot has no other delivery in parts.
func (x *botIndex) add(parts []Participant, i int) {
	p := &parts[i]
	h := botHash(p.Adapter, p.BotID)
	if _, taken := x.byHash[h]; !taken {
		x.byHash[h] = int32(i)
		return
	}
	if x.spill == nil {
		x.spill = make(map[bot]int32)
	}
	x.spill[bot{p.Adapter, p.BotID}] = int32(i)
}
