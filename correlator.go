package dedupe

import (
	"hash/maphash"
	"sync"
	"time"
)

// Defaults of [CorrelatorConfig].
const (
	// defaultMessageWindow is how long copies of a message are correlated,
	// counted from the first copy's arrival.
	defaultMessageWindow = 15 * time.Second
	// defaultEventWindow is how long copies of a notice or request are
	// correlated, counted from the first copy's arrival.
	defaultEventWindow = 60 * time.Second
	// defaultMaxGroups is how many correlation groups an [EventCorrelator]
	// keeps.
	defaultMaxGroups = 4096
)

// Participant is one delivery of a logical event: the adapter, the bot and
// the message id that bot knows it by (empty for notices and requests).
type Participant struct {
	Adapter   string
	BotID     string
	MessageID string
}

// Observation is what an [EventCorrelator] concluded about one delivery.
type Observation struct {
	Key CorrelationKey // zero for kinds that are not correlated
	// Duplicate reports that an earlier delivery of the same logical event
	// was observed: this one joined its group or repeats a copy in it.
	Duplicate bool
	// Primary is the group's first delivery, which the core treats as the
	// logical event; for a delivery that is not a duplicate, itself.
	Primary Participant
	// Participants are the group's deliveries in arrival order, up to this
	// one (or the copy it repeats). The slice is shared: do not modify it.
	Participants []Participant
	// Err is [ErrTooLarge] for an event the correlator refused to
	// correlate because its canonical form is longer than
	// 1 MiB; it is its own primary, never a duplicate. Nil
	// otherwise.
	Err error

	c *EventCorrelator // the correlator that made the observation
	g *group           // the delivery's group; nil for kinds not correlated
}

// CorrelatorConfig configures an [EventCorrelator]; zero fields take their
// defaults.
type CorrelatorConfig struct {
	// MessageWindow is how long a message group accepts copies, from its first
	// arrival, boundary included. Default 15 s.
	MessageWindow time.Duration
	// EventWindow is the same for notices and requests. Default 60 s.
	EventWindow time.Duration
	MaxGroups   int // groups kept, the oldest evicted beyond it; default 4096
	// TimestampTolerance is how far a delivery's send time
	// ([Identity.Timestamp]: a message's, a notice's or a request's) may be
	// from its group's (that of the group's first timestamped delivery),
	// boundary included, for it to join; a delivery further off joins or starts
	// a group of its own time. Missing send times are not compared. Default
	// 1 s: OneBot and icqq send whole seconds, and adapters that truncate,
	// round or give milliseconds put up to a second between copies, while a
	// user sending the same content again takes longer.
	TimestampTolerance time.Duration
	Now                func() time.Time // the correlator's clock; default time.Now
}

// CorrelatorStats are an [EventCorrelator]'s counters. TimeRefused and Evicted
// are shadow figures for tuning the tolerance and the cap.
type CorrelatorStats struct {
	Groups     int    // live groups now
	Observed   uint64 // calls of Observe
	Duplicates uint64 // observed deliveries marked duplicate
	// TimeRefused counts message deliveries a live group of their key refused
	// for their send time; Evicted counts groups dropped to stay within
	// MaxGroups before their window ended.
	TimeRefused, Evicted uint64
	// TooLarge counts deliveries not correlated because their canonical
	// form is longer than 1 MiB (see [ErrTooLarge]).
	TooLarge uint64
	// ImageMatched counts the duplicates that joined their group by the image
	// rule (see [EventCorrelator]): their key differed from the group's only
	// in how an image was named.
	ImageMatched uint64
}

// EventCorrelator recognises the copies of one logical event delivered by
// several bots or adapters, so that each handler can choose to skip them. It
// marks duplicates and drops nothing; it is safe for concurrent use and starts
// no goroutine.
//
// Deliveries with the same [Event.CorrelationKey] within the window of the first
// form a group; the first is its primary. A bot delivering a key it already
// delivered to a live group under another message id is a genuine repeat: as
// a bot delivers one sender's messages in the order they were sent, it joins
// the oldest live group of its key newer than the newest this bot delivered
// to, or starts one. The same bot and message id again is a redelivery, a
// duplicate. A delivery joins a group only if its send time
// ([Identity.Timestamp]) is within [CorrelatorConfig].TimestampTolerance of the
// group's, so a repeat is told from a copy even when a bot missed the first
// message, and copies whose adapters round the time differently still meet.
//
// Adapters name one image differently (its md5, or only a download URL), so
// a copy's key may differ from its group's. A message that joins no group by
// its key joins, by the image rule, the oldest live group of the same chat,
// sender and content apart from image identities when it has a segment other
// than images (a caption, a mention, a face…), no image of it is known to
// differ (two different digests, or two different normalised URLs of one
// host), both send times are known and within the tolerance, and its bot is
// not yet in the group. The group remembers every identity it has seen of
// each image. A message of images alone never joins this way: people send
// several photos in one second. Windows are fixed from the
// first arrival, end included. At most MaxGroups groups are kept, the oldest
// evicted in constant time; an observation costs the same however many groups
// or bots there are, and however often one sender repeats one text: the
// groups of a key with more than one are indexed by bot and message id.
type EventCorrelator struct {
	now       func() time.Time
	epoch     time.Time        // group arrival times count from it; see since
	anchored  bool             // whether epoch was set
	windows   [2]time.Duration // by window class: messages, notices and requests
	max       int
	tolerance time.Duration

	mu     sync.Mutex
	groups map[CorrelationKey]*group      // the oldest live group of each key
	chains map[CorrelationKey]*chainIndex // the keys with more than one live group
	seed   maphash.Seed                   // of the hashes chain indexes and image identities are
	loose  map[CorrelationKey]*group      // the oldest live group of each loose key (see looseInfo)
	fifo   [2]groupList                   // live groups by class, oldest first
	n      int                            // len of both lists
	seq    uint64
	stats  CorrelatorStats
}

// group is a correlation group: the deliveries of one logical event.
type group struct {
	key     CorrelationKey
	seq     uint64        // creation order, for eviction across classes
	expires time.Duration // the last instant the group accepts copies, since the epoch
	sent    time.Duration // the send time (see sendTime), from the first delivery with one, or unsent
	class   int

	prev, next *group // in the class's FIFO list
	newer      *group // the next newer group with the same key

	parts  []Participant // in arrival order; only appended to
	inline [3]Participant
	index  *botIndex   // positions in parts by bot, once there are more than linearParts
	img    *imageGroup // for the image rule; nil for groups it does not apply to
}

// bot identifies the bot of a delivery.
type bot struct {
	adapter, id string
}

// groupList is an intrusive doubly linked list of groups, oldest first.
type groupList struct {
	front, back *group
}

func (l *groupList) pushBack(g *group) {
	g.prev, g.next = l.back, nil
	if l.back != nil {
		l.back.next = g
	} else {
		l.front = g
	}
	l.back = g
}

func (l *groupList) remove(g *group) {
	if g.prev != nil {
		g.prev.next = g.next
	} else {
		l.front = g.next
	}
	if g.next != nil {
		g.next.prev = g.prev
	} else {
		l.back = g.prev
	}
	g.prev, g.next = nil, nil
}

// NewEventCorrelator returns a correlator configured by cfg.
func NewEventCorrelator(cfg CorrelatorConfig) *EventCorrelator {
	c := &EventCorrelator{
		now: cfg.Now,
		windows: [2]time.Duration{
			orDefault(cfg.MessageWindow, defaultMessageWindow),
			orDefault(cfg.EventWindow, defaultEventWindow),
		},
		max:       cfg.MaxGroups,
		tolerance: orDefault(cfg.TimestampTolerance, time.Second),
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.max <= 0 {
		c.max = defaultMaxGroups
	}
	c.groups = make(map[CorrelationKey]*group, min(c.max, 1024))
	c.chains = make(map[CorrelationKey]*chainIndex)
	c.seed = maphash.MakeSeed()
	c.loose = make(map[CorrelationKey]*group)
	return c
}

// Observe correlates one delivery with those observed before and returns the
// verdict, keeping nothing of ev but its key, its [Participant] and, for a
// message with images and other segments, its images' URL strings (at most 8
// a group, until the image rule compares the group). Observing an
// Event again is a redelivery: a duplicate while its group is live. An event of
// a kind that is not correlated is its own primary, never a duplicate, and so
// is an event too large to correlate, whose observation's Err says so. The key
// is computed before the correlator's lock is taken, in at most
// maxCanonicalSize bytes.
func (c *EventCorrelator) Observe(ev *Event) Observation {
	self := ev.participant()
	class, correlated := ev.windowClass()
	var key CorrelationKey
	var err error
	var loose looseInfo // what the image rule needs, for messages
	li := &loose
	if ev.Kind != "message" {
		li = nil
	} else {
		li.seed = c.seed
	}
	if correlated {
		var st keyStatus
		if key, st = ev.correlationKey(li); st == tooLarge {
			correlated, err = false, ErrTooLarge
		}
	}
	if !correlated {
		c.mu.Lock()
		c.stats.Observed++
		if err != nil {
			c.stats.TooLarge++
		}
		c.mu.Unlock()
		return Observation{Primary: self, Participants: []Participant{self}, Err: err, c: c}
	}
	t, sent := c.now(), sendTime(ev.Identity.Timestamp)
	if li != nil && !li.eligible() {
		li = nil
	}

	c.mu.Lock()
	c.stats.Observed++
	now := c.since(t)
	c.sweep(now)
	g, n, dup := c.place(key, class, self, sent, now, li)
	obs := Observation{Key: key, Duplicate: dup, Primary: g.parts[0], Participants: g.parts[:n:n], c: c, g: g}
	c.mu.Unlock()
	return obs
}

// place puts a delivery into its group, creating the group if needed, and
// returns the group, the number of participants the delivery's observation
// covers, and whether it is a duplicate. A bot's deliveries of one key come in
// the order they were sent, so a delivery is looked for among the groups
// newer than the bot's newest one: the walk skips no group the bot is in. A
// delivery that joins no group of its key may join one by the image rule (li,
// nil when the rule does not apply to it). c.mu is held.
func (c *EventCorrelator) place(key CorrelationKey, class int, self Participant, sent, now time.Duration, li *looseInfo) (g *group, n int, dup bool) {
	head := c.groups[key]
	ci := c.chainOf(head)
	var h deliveryHashes
	start, refused := head, false
	if ci != nil {
		h = c.hashes(self)
		if g, n, dup, done := c.placeInChain(ci, head, h, self, sent, now); done {
			return g, n, dup
		} else if g != nil {
			start, refused = g.newer, n > 0
		}
	}
	for cand := start; cand != nil; cand = cand.newer {
		if now > cand.expires {
			continue // ended, not swept yet because the clock went back
		}
		i := cand.indexOf(self.Adapter, self.BotID)
		if i >= 0 && cand.parts[i].MessageID != self.MessageID {
			continue // the bot delivered this key to cand under another id: a genuine repeat
		}
		if i >= 0 && self.MessageID != "" { // a redelivery: the same message, whatever its time
			c.stats.Duplicates++
			return cand, i + 1, true
		}
		if !c.sameTime(cand.sent, sent) {
			if !refused {
				refused = true
				c.stats.TimeRefused++
			}
			continue
		}
		c.stats.Duplicates++
		if i >= 0 { // a redelivery of a delivery without a message id
			return cand, i + 1, true
		}
		cand.add(self)
		if cand.sent == unsent {
			cand.sent = sent
		}
		if ci != nil {
			ci.index(cand, self, h)
		}
		if li != nil && cand.img != nil {
			cand.img.rememberURLs(c.seed, li)
			cand.img.rememberSent(self.Adapter, sent)
		}
		return cand, len(cand.parts), true
	}
	if li != nil {
		if g, n, dup := c.looseJoin(li, self, sent, now); g != nil {
			return g, n, dup
		}
	}
	return c.create(head, ci, h, key, class, self, sent, now, li), 1, false
}

// placeInChain looks a delivery up in the index ci of its key's chain, which
// starts at head; h are the delivery's hashes. done reports a redelivery,
// placed in g. Otherwise g is the bot's newest group of the key, if it has one
// and the index could tell (nil means walking the chain from head), and n is
// 1 if a delivery without a message id was refused by it for its time.
func (c *EventCorrelator) placeInChain(ci *chainIndex, head *group, h deliveryHashes, self Participant, sent, now time.Duration) (g *group, n int, dup, done bool) {
	again, last, ok := ci.lookup(head, self, h)
	if again != nil && now <= again.expires {
		c.stats.Duplicates++ // a redelivery: the same message, whatever its time
		return again, again.indexOf(self.Adapter, self.BotID) + 1, true, true
	}
	if !ok || last == nil {
		return nil, 0, false, false
	}
	if i := last.indexOf(self.Adapter, self.BotID); self.MessageID == "" && last.parts[i].MessageID == "" && now <= last.expires {
		if c.sameTime(last.sent, sent) { // a redelivery without a message id
			c.stats.Duplicates++
			return last, i + 1, true, true
		}
		c.stats.TimeRefused++
		return last, 1, false, false
	}
	return last, 0, false, false
}

// create starts a group for a delivery, the newest of its key, whose oldest
// group is head (nil if there is none) and chain index ci (nil if it has one
// group or none; else h are the delivery's hashes), and evicts the oldest
// groups beyond the cap. c.mu is held.
func (c *EventCorrelator) create(head *group, ci *chainIndex, h deliveryHashes, key CorrelationKey, class int, self Participant, sent, now time.Duration, li *looseInfo) *group {
	c.seq++
	g := &group{key: key, seq: c.seq, expires: addSat(now, c.windows[class]), sent: sent, class: class}
	g.inline[0] = self
	g.parts = g.inline[:1]
	switch {
	case head == nil:
		c.groups[key] = g
	case ci == nil: // the key's second group
		head.newer = g
		c.chains[key] = c.newChainIndex(head)
	default:
		ci.tail.newer = g
		ci.tail = g
		ci.index(g, self, h)
	}
	if li != nil {
		c.addLoose(g, li, self)
	}
	c.fifo[class].pushBack(g)
	c.n++
	for c.n > c.max {
		c.evictOldest(now)
	}
	return g
}

// sameTime reports whether two send times are within the tolerance, or one
// is unknown.
func (c *EventCorrelator) sameTime(a, b time.Duration) bool {
	if a == unsent || b == unsent {
		return true
	}
	if a < b {
		a, b = b, a
	}
	return a-b >= 0 && a-b <= c.tolerance // a-b < 0: it overflowed, so far apart
}

// sweep removes the groups whose window ended before now. Each class's list is
// in creation order, which is the order of expiry, so only fronts are looked
// at. c.mu is held.
func (c *EventCorrelator) sweep(now time.Duration) {
	for class := range c.fifo {
		for g := c.fifo[class].front; g != nil && now > g.expires; g = c.fifo[class].front {
			c.remove(g)
		}
	}
}

// evictOldest removes the oldest group, by creation, of either class,
// counting it as evicted if its window had not ended. c.mu is held and there
// is at least one group.
func (c *EventCorrelator) evictOldest(now time.Duration) {
	a, b := c.fifo[0].front, c.fifo[1].front
	if a == nil || (b != nil && b.seq < a.seq) {
		a = b
	}
	c.remove(a)
	if now <= a.expires {
		c.stats.Evicted++
	}
}

// remove unlinks g from its list and its key's chain. Groups are only removed
// from the front of a list, and a key's groups are all in one list (the kind
// is part of the key), so g is the oldest of its key and heads its chain.
// c.mu is held.
func (c *EventCorrelator) remove(g *group) {
	c.unchain(g)
	c.removeLoose(g)
	c.fifo[g.class].remove(g)
	c.n--
	if g.newer != nil {
		c.groups[g.key] = g.newer
	} else {
		delete(c.groups, g.key)
	}
	g.newer = nil
}

// Participants returns, in constant time, the deliveries of obs's group so
// far in arrival order, those after obs included: which bots received the
// logical event, under which message ids. The slice is shared: do not modify
// it. For an observation c did not make, it returns obs.Participants.
func (c *EventCorrelator) Participants(obs Observation) []Participant {
	if obs.c != c || obs.g == nil {
		return obs.Participants
	}
	c.mu.Lock()
	parts := obs.g.parts
	c.mu.Unlock()
	return parts[:len(parts):len(parts)]
}

// Participant returns, in constant time, the delivery of obs's logical event by
// the given bot so far, and false if that bot has not delivered it.
func (c *EventCorrelator) Participant(obs Observation, adapter, botID string) (_ Participant, ok bool) {
	if obs.c != c || obs.g == nil {
		for _, p := range obs.Participants {
			if p.Adapter == adapter && p.BotID == botID {
				return p, true
			}
		}
		return Participant{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if i := obs.g.indexOf(adapter, botID); i >= 0 {
		return obs.g.parts[i], true
	}
	return Participant{}, false
}

// Stats returns the correlator's counters, live groups only.
func (c *EventCorrelator) Stats() CorrelatorStats {
	t := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(c.since(t))
	s := c.stats
	s.Groups = c.n
	return s
}
