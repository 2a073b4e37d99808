package dedupe

import "hash/maphash"

// chainIndex indexes the deliveries of a key that has more than one live
// group (a chain: a message sent again, or copies the time rule kept apart),
// so that placing a delivery costs the same however long the chain is. A key
// with one group needs no index: the group's own participants are searched.
//
// Entries are keyed by a seeded 64-bit hash of the bot, or of the bot and
// message id, and checked against the group they point to, so a collision
// costs a walk of the chain, never a wrong verdict. Entries of groups that left
// the chain are not deleted one by one but ignored, and the index is rebuilt
// from the live groups once it holds twice as many entries as they have
// deliveries, so it stays in proportion to them.
type chainIndex struct {
	tail  *group            // the key's newest group
	last  map[uint64]*group // each bot's newest group of the key, by bot hash
	byMsg map[uint64]*group // the group of each delivery with a message id, by hash
	parts int               // deliveries in the chain's groups
}

// botMessage identifies a delivery with a message id.
type botMessage struct {
	bot bot
	msg string
}

// newChainIndex indexes the deliveries of the groups of a chain, from its
// oldest group head on.
func (c *EventCorrelator) newChainIndex(head *group) *chainIndex {
	ci := &chainIndex{}
	c.reindex(ci, head)
	return ci
}

// reindex rebuilds ci from the groups of its chain, from head on.
func (c *EventCorrelator) reindex(ci *chainIndex, head *group) {
	n := 0
	for g := head; g != nil; g = g.newer {
		n += len(g.parts)
	}
	ci.last, ci.byMsg, ci.parts = make(map[uint64]*group, n), make(map[uint64]*group, n), 0
	for g := head; g != nil; g = g.newer {
		for _, p := range g.parts {
			ci.index(g, p, c.hashes(p))
		}
		ci.tail = g
	}
}

// deliveryHashes are the hashes a delivery is indexed by: of its bot, and of
// its bot and message id (0 without one).
type deliveryHashes struct {
	bot, msg uint64
}

// hashes returns the hashes p is indexed by.
func (c *EventCorrelator) hashes(p Participant) deliveryHashes {
	b := bot{p.Adapter, p.BotID}
	h := deliveryHashes{bot: maphash.Comparable(c.seed, b)}
	if p.MessageID != "" {
		h.msg = maphash.Comparable(c.seed, botMessage{b, p.MessageID})
	}
	return h
}

// index records that the delivery p, of hashes h, was made to g, the newest
// group of its key its bot delivered to.
func (ci *chainIndex) index(g *group, p Participant, h deliveryHashes) {
	ci.last[h.bot] = g
	if p.MessageID != "" {
		ci.byMsg[h.msg] = g
	}
	ci.parts++
}

// chainOf returns the index of the chain that starts at head, or nil if the
// key has one group or none.
func (c *EventCorrelator) chainOf(head *group) *chainIndex {
	if head == nil || head.newer == nil {
		return nil
	}
	return c.chains[head.key]
}

// lookup returns the group of the chain starting at head in which p's bot
// delivered p's message id, and the bot's newest group; h are p's hashes. ok
// is false when an entry points to a group without the bot, by a hash
// collision: the caller then walks the chain.
func (ci *chainIndex) lookup(head *group, p Participant, h deliveryHashes) (redelivered, last *group, ok bool) {
	if p.MessageID != "" {
		if g := ci.byMsg[h.msg]; g != nil && g.seq >= head.seq {
			if i := g.indexOf(p.Adapter, p.BotID); i >= 0 && g.parts[i].MessageID == p.MessageID {
				return g, nil, true
			}
			return nil, nil, false
		}
	}
	if g := ci.last[h.bot]; g != nil && g.seq >= head.seq {
		if g.indexOf(p.Adapter, p.BotID) < 0 {
			return nil, nil, false
		}
		return nil, g, true
	}
	return nil, nil, true
}

// unchain forgets g, the oldest group of its key, in its chain's index, and
// the index itself once one group is left. c.mu is held.
func (c *EventCorrelator) unchain(g *group) {
	if g.newer == nil {
		return // the key's only group: it has no index
	}
	ci, ok := c.chains[g.key]
	if !ok {
		return
	}
	if g.newer == nil || g.newer.newer == nil {
		delete(c.chains, g.key)
		return
	}
	ci.parts -= len(g.parts)
	if len(ci.byMsg)+len(ci.last) > 4*ci.parts+64 {
		c.reindex(ci, g.newer)
	}
}
