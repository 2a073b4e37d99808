package dedupe

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe/internal/canon"
)

// Defaults of [CorrelatorConfig].
const (
	// DefaultMessageWindow is how long copies of a message are correlated,
	// counted from the first copy's arrival.
	DefaultMessageWindow = 15 * time.Second
	// DefaultEventWindow is how long copies of a notice or request are
	// correlated, counted from the first copy's arrival.
	DefaultEventWindow = 60 * time.Second
	// DefaultMaxGroups is how many correlation groups a [Correlator] keeps.
	DefaultMaxGroups = 4096
)

// Identity says who delivered an [Event]: the adapter (such as "onebotv11" or
// "icqq"), the receiving bot's account id, and the ids the platform gave this
// copy. Adapters fill it in; ids differ between adapters for one message.
type Identity struct {
	Adapter       string
	BotID         string
	EventType     string // such as "message.group", as the adapter names it
	MessageID     string // the platform message id of this copy, if any
	NativeEventID string // an adapter's own id for notices and requests (a request flag)
	Timestamp     time.Time
}

// Event is one delivery of a chat event by one adapter, in the OneBot model. The
// same logical event, seen by several bots or adapters, arrives as several
// Events with different identities; a [Correlator] recognises them.
//
// An Event records the observation a Correlator made of it (see
// [Correlator.Observe]), so pass each delivery as its own *Event, do not modify
// an Event once it is observed, and do not observe one Event with two
// Correlators at a time. A copy of an observed Event (*ev) counts as a new
// delivery.
type Event struct {
	// Kind is "message", "notice" or "request". Events of other kinds (such as
	// "meta_event") are never correlated.
	Kind     string
	Identity Identity

	MessageType string // "group" or "private", for messages
	NoticeType  string // such as "group_increase", for notices
	RequestType string // "friend" or "group", for requests
	SubType     string

	GroupID    string
	UserID     string // the sender, or the user a notice or request is about
	OperatorID string
	Comment    string // a request's verification message

	Segments []Segment // a message's content

	corr corrRecord
}

// corrRecord is what a Correlator left in an Event it observed: enough to
// rebuild the observation, since a group's first n participants never change.
type corrRecord struct {
	by   *Correlator
	self *Event // the address observed: a copied Event is a new delivery
	g    *group // nil for kinds that are not correlated
	n    int    // the observation's number of participants
	dup  bool
}

// observation rebuilds the observation recorded in ev. The recording
// correlator's lock is held.
func (ev *Event) observation() Observation {
	if g := ev.corr.g; g != nil {
		return g.observation(ev.corr.n, ev.corr.dup)
	}
	self := ev.participant()
	return Observation{Primary: self, Participants: []Participant{self}}
}

// detailType returns the second part of the event's route, such as "group"
// for a group message.
func (ev *Event) detailType() string {
	switch ev.Kind {
	case "message":
		return ev.MessageType
	case "notice":
		return ev.NoticeType
	case "request":
		return ev.RequestType
	}
	return ""
}

// participant returns the delivery's bot and message id.
func (ev *Event) participant() Participant {
	return Participant{Adapter: ev.Identity.Adapter, BotID: ev.Identity.BotID, MessageID: ev.Identity.MessageID}
}

// windowClass returns which window applies to the event: 0 for messages, 1 for
// notices and requests. ok is false for kinds that are not correlated.
func (ev *Event) windowClass() (class int, ok bool) {
	switch ev.Kind {
	case "message":
		return 0, true
	case "notice", "request":
		return 1, true
	}
	return 0, false
}

// appendCanonical appends the canonical form of the event's correlation key: a
// sequence of netstrings ("{len}:{bytes},") of
//
//	message: "message", message type, session (the group id, or the user id
//	         for private messages and messages without a group), sender user
//	         id, then the [Signature] of the segments
//	notice:  "notice", notice type, sub type, group id, user id, operator
//	         id, event time in Unix seconds ("" if unknown)
//	request: "request", request type, sub type, group id, user id, operator
//	         id, event time in Unix seconds, comment
//
// Each kind has a fixed number of fields before the signature, so no two
// different field lists give one form. ok is false for other kinds.
func (ev *Event) appendCanonical(buf []byte) (_ []byte, ok bool) {
	switch ev.Kind {
	case "message":
		session := ev.GroupID
		if ev.MessageType == "private" || session == "" {
			session = ev.UserID
		}
		buf = canon.AppendNetstring(buf, "message")
		buf = canon.AppendNetstring(buf, ev.MessageType)
		buf = canon.AppendNetstring(buf, session)
		buf = canon.AppendNetstring(buf, ev.UserID)
		return appendSignature(buf, ev.Segments), true
	case "notice", "request":
		buf = canon.AppendNetstring(buf, ev.Kind)
		if ev.Kind == "notice" {
			buf = canon.AppendNetstring(buf, ev.NoticeType)
		} else {
			buf = canon.AppendNetstring(buf, ev.RequestType)
		}
		buf = canon.AppendNetstring(buf, ev.SubType)
		buf = canon.AppendNetstring(buf, ev.GroupID)
		buf = canon.AppendNetstring(buf, ev.UserID)
		buf = canon.AppendNetstring(buf, ev.OperatorID)
		var sec []byte
		var tmp [24]byte
		if !ev.Identity.Timestamp.IsZero() {
			sec = strconv.AppendInt(tmp[:0], ev.Identity.Timestamp.Unix(), 10)
		}
		buf = canon.AppendNetstringBytes(buf, sec)
		if ev.Kind == "request" {
			buf = canon.AppendNetstring(buf, ev.Comment)
		}
		return buf, true
	}
	return buf, false
}

// CorrelationKey returns the key under which copies of the event are
// correlated: the first 128 bits of the SHA-256 of [Event.CanonicalForm]. It
// returns the zero key for kinds that are not correlated.
func (ev *Event) CorrelationKey() CorrelationKey {
	var stack [512]byte
	buf, ok := ev.appendCanonical(stack[:0])
	if !ok {
		return CorrelationKey{}
	}
	sum := sha256.Sum256(buf)
	return CorrelationKey(sum[:len(CorrelationKey{})])
}

// CanonicalForm returns the readable form of the event's correlation key, the
// bytes whose digest is [Event.CorrelationKey], for debugging: netstrings of
// the kind, its fields and the content [Signature], such as
//
//	7:message,5:group,3:286,5:25258,4:text,7:the bot,
//
// It returns "" for kinds that are not correlated. The form holds the whole
// text of the message; the correlator keeps only the digest.
func (ev *Event) CanonicalForm() string {
	buf, _ := ev.appendCanonical(nil)
	return string(buf)
}

// CorrelationKey identifies a logical event across deliveries: a 128-bit digest
// of its canonical form. Its zero value means "not correlated".
type CorrelationKey [16]byte

// String returns the key in hex.
func (k CorrelationKey) String() string {
	return hex.EncodeToString(k[:])
}

// IsZero reports whether k is the zero key.
func (k CorrelationKey) IsZero() bool {
	return k == CorrelationKey{}
}

// Participant is one delivery of a logical event: the adapter and bot that
// received it and the message id that bot knows it by (empty for notices and
// requests).
type Participant struct {
	Adapter   string
	BotID     string
	MessageID string
}

// Observation is what a [Correlator] concluded about one delivery.
type Observation struct {
	// Key is the delivery's correlation key, zero for kinds that are not
	// correlated.
	Key CorrelationKey
	// Duplicate reports that an earlier delivery of the same logical event was
	// observed: this delivery joined its group, or is a redelivery of a copy
	// already in it. The first delivery of a group is not a duplicate.
	Duplicate bool
	// Primary is the group's first delivery, which the core treats as the
	// logical event. For a delivery that is not a duplicate it is the delivery
	// itself.
	Primary Participant
	// Participants are the group's deliveries in arrival order, up to and
	// including this one (for a redelivery, up to the copy it repeats). The slice
	// is shared and must not be modified.
	Participants []Participant
}

// CorrelatorConfig configures a [Correlator]. The zero value gives the
// defaults; zero or negative fields take their default.
type CorrelatorConfig struct {
	// MessageWindow is how long a message group accepts copies, from its first
	// arrival, boundary included. Default 15 s ([DefaultMessageWindow]).
	MessageWindow time.Duration
	// EventWindow is the same for notices and requests. Default 60 s
	// ([DefaultEventWindow]).
	EventWindow time.Duration
	// MaxGroups bounds the groups kept; beyond it the oldest group is evicted.
	// Default 4096 ([DefaultMaxGroups]).
	MaxGroups int
	// Now is the correlator's clock. Default time.Now.
	Now func() time.Time
}

// CorrelatorStats are a [Correlator]'s counters.
type CorrelatorStats struct {
	Groups     int    // live groups now
	Observed   uint64 // deliveries observed, each *Event once
	Duplicates uint64 // observed deliveries marked duplicate
	Evicted    uint64 // groups dropped to stay within MaxGroups before their window ended
}

// Correlator recognises the copies of one logical event delivered by several
// bots or adapters, at the transport boundary, so that each handler can choose
// to skip them. It marks duplicates and drops nothing.
//
// Deliveries with the same [Event.CorrelationKey] within the window of the first
// form a group; the first is its primary. A genuine repeat is not a duplicate:
// when a bot delivers a key it already delivered to a live group, under a
// different message id, the user sent the content again, so the delivery joins
// the oldest live group of its key that this bot has not delivered to yet, or
// starts a new group. The same message id from the same bot again is a
// redelivery, and a duplicate.
//
// Windows are fixed: they run from the group's first arrival and are not
// extended by copies; an arrival exactly at the end still joins. After the
// window the same content starts a new group. At most MaxGroups groups are
// kept: creating one more evicts the oldest by creation, in constant time. The
// cost of an observation does not depend on the number of groups.
//
// A Correlator is safe for concurrent use and starts no goroutine.
type Correlator struct {
	now     func() time.Time
	windows [2]time.Duration // by window class: messages, notices and requests
	max     int

	mu     sync.Mutex
	groups map[CorrelationKey]*group // the oldest live group of each key
	fifo   [2]groupList              // live groups by class, oldest first
	n      int                       // len of both lists
	seq    uint64
	stats  CorrelatorStats
}

// group is a correlation group: the deliveries of one logical event.
type group struct {
	key     CorrelationKey
	seq     uint64    // creation order, for eviction across classes
	expires time.Time // the last instant the group accepts copies
	class   int

	prev, next *group // in the class's FIFO list
	newer      *group // the next newer group with the same key

	parts  []Participant // in arrival order; only appended to
	inline [3]Participant
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

// NewCorrelator returns a correlator configured by cfg.
func NewCorrelator(cfg CorrelatorConfig) *Correlator {
	c := &Correlator{
		now:     cfg.Now,
		windows: [2]time.Duration{cfg.MessageWindow, cfg.EventWindow},
		max:     cfg.MaxGroups,
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.windows[0] <= 0 {
		c.windows[0] = DefaultMessageWindow
	}
	if c.windows[1] <= 0 {
		c.windows[1] = DefaultEventWindow
	}
	if c.max <= 0 {
		c.max = DefaultMaxGroups
	}
	c.groups = make(map[CorrelationKey]*group, min(c.max, 1024))
	return c
}

// Observe correlates one delivery with those observed before and returns the
// verdict. Observing the same *Event again returns the first verdict and
// changes nothing. An event of a kind that is not correlated is counted as
// observed and returned as its own primary, never a duplicate.
//
// The key is computed before the correlator's lock is taken, so concurrent
// callers contend only for a map lookup and a few pointer updates.
func (c *Correlator) Observe(ev *Event) Observation {
	class, correlated := ev.windowClass()
	var key CorrelationKey
	if correlated {
		key = ev.CorrelationKey()
	}
	now := c.now()
	self := ev.participant()

	c.mu.Lock()
	if ev.corr.by != c || ev.corr.self != ev {
		c.stats.Observed++
		ev.corr = corrRecord{by: c, self: ev}
		if correlated {
			c.sweep(now)
			ev.corr.g, ev.corr.n, ev.corr.dup = c.place(key, class, self, now)
		}
	}
	obs := ev.observation() // reads the group's participants: under the lock
	c.mu.Unlock()
	return obs
}

// place puts a delivery into its group, creating the group if needed, and
// returns the group, the number of participants the delivery's observation
// covers, and whether it is a duplicate. c.mu is held.
func (c *Correlator) place(key CorrelationKey, class int, self Participant, now time.Time) (g *group, n int, dup bool) {
	var last *group
	for cand := c.groups[key]; cand != nil; cand = cand.newer {
		last = cand
		if now.After(cand.expires) {
			continue // ended, not swept yet because the clock went back
		}
		i := cand.indexOf(self.Adapter, self.BotID)
		if i < 0 { // a copy from a bot new to this group
			cand.parts = append(cand.parts, self)
			c.stats.Duplicates++
			return cand, len(cand.parts), true
		}
		if cand.parts[i].MessageID == self.MessageID { // a redelivery
			c.stats.Duplicates++
			return cand, i + 1, true
		}
		// The bot delivered this key to cand already under another id: a
		// genuine repeat, which belongs to a newer group.
	}

	c.seq++
	g = &group{key: key, seq: c.seq, expires: now.Add(c.windows[class]), class: class}
	g.inline[0] = self
	g.parts = g.inline[:1]
	if last == nil {
		c.groups[key] = g
	} else {
		last.newer = g
	}
	c.fifo[class].pushBack(g)
	c.n++
	for c.n > c.max {
		c.evictOldest()
	}
	return g, 1, false
}

// indexOf returns the index of the bot's delivery in the group, or -1.
func (g *group) indexOf(adapter, botID string) int {
	for i := range g.parts {
		if g.parts[i].BotID == botID && g.parts[i].Adapter == adapter {
			return i
		}
	}
	return -1
}

// observation returns the observation of the group's n-th delivery. The
// participants share the group's array, whose first n entries never change.
func (g *group) observation(n int, dup bool) Observation {
	return Observation{Key: g.key, Duplicate: dup, Primary: g.parts[0], Participants: g.parts[:n:n]}
}

// sweep removes the groups whose window ended before now. Each class's list is
// in creation order, which is the order of expiry, so only fronts are looked
// at. c.mu is held.
func (c *Correlator) sweep(now time.Time) {
	for class := range c.fifo {
		for g := c.fifo[class].front; g != nil && now.After(g.expires); g = c.fifo[class].front {
			c.remove(g)
		}
	}
}

// evictOldest removes the oldest group, by creation, of either class. c.mu is
// held and there is at least one group.
func (c *Correlator) evictOldest() {
	a, b := c.fifo[0].front, c.fifo[1].front
	if a == nil || (b != nil && b.seq < a.seq) {
		a = b
	}
	c.remove(a)
	c.stats.Evicted++
}

// remove unlinks g from its list and its key's chain. Groups are only removed
// from the front of a list, which is the oldest of its key, so g heads its
// chain. c.mu is held.
func (c *Correlator) remove(g *group) {
	c.fifo[g.class].remove(g)
	c.n--
	if head := c.groups[g.key]; head == g {
		if g.newer != nil {
			c.groups[g.key] = g.newer
		} else {
			delete(c.groups, g.key)
		}
	} else { // not reached while the invariant holds; kept for safety
		for p := head; p != nil; p = p.newer {
			if p.newer == g {
				p.newer = g.newer
				break
			}
		}
	}
	g.newer = nil
}

// Correlation returns the observation made of ev by [Correlator.Observe], and
// false if c has not observed ev.
func (c *Correlator) Correlation(ev *Event) (Observation, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.corr.by != c || ev.corr.self != ev {
		return Observation{}, false
	}
	return ev.observation(), true
}

// participants returns a copy of the current deliveries of ev's group,
// including those that arrived after ev, and false if c has not observed ev.
func (c *Correlator) participants(ev *Event) ([]Participant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ev.corr.by != c || ev.corr.self != ev {
		return nil, false
	}
	if ev.corr.g == nil {
		return []Participant{ev.participant()}, true
	}
	return append([]Participant(nil), ev.corr.g.parts...), true
}

// Stats returns the correlator's counters. Groups whose window has ended are
// not counted.
func (c *Correlator) Stats() CorrelatorStats {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweep(now)
	s := c.stats
	s.Groups = c.n
	return s
}
