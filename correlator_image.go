package dedupe

import (
	"crypto/sha256"
	"hash/maphash"
	"time"

	"github.com/gatewaykit/dedupe/internal/canon"
)

// The image rule: adapters name one image differently (one gives its md5,
// another only a download URL), so the copies of a message with an image may
// have different keys. A message that joins no group by its key may join a
// live group of the same chat, sender and content apart from image identities
// (its loose key) when it has a segment other than images, no image of it is
// known to differ from the group's, both send times are known and within the
// tolerance, and its bot is not yet in the group. A message of images alone
// never joins this way: people send several photos in one second.

// Bounds of the image rule.
const (
	// maxLooseImages is the most images a message may have to join by the
	// image rule.
	maxLooseImages = 8
	// maxImageIDs is the most image identities a group remembers; a group
	// that saw more takes no copy by the image rule.
	maxImageIDs = 32
	// maxLooseWalk is the most groups of one loose key a delivery is
	// compared with.
	maxLooseWalk = 32
)

// imageID is one identity of an image of a message, by seeded 64-bit hashes:
// a digest, or a normalised URL and its host. Two identities of one kind
// (and, for URLs, one host) with different values say the images differ;
// URLs of different hosts say nothing.
type imageID struct {
	slot  uint8  // the image's position among the message's images
	isURL bool   // a URL, else a digest
	host  uint64 // for a URL, the hash of its host
	value uint64 // the hash of the digest or URL
}

// looseInfo is what the image rule needs of a delivery, computed before the
// correlator's lock is taken. The URL of an image with a digest is kept as
// given: it is normalised only when the rule compares the delivery with a
// group (see identities) or a group compares it (see pendingURL).
type looseInfo struct {
	key    CorrelationKey // the digest of the canonical form without image identities
	img    [maxLooseImages]looseImage
	spans  [maxLooseImages][2]int32 // where each image's identity is in the canonical form
	images int                      // images seen
	others int                      // segments other than images and replies seen
	seed   maphash.Seed
}

// looseImage is what looseInfo knows of one image.
type looseImage struct {
	url       string // the URL as given, "" if none
	digest    uint64 // the hash of its digest identity, if hasDigest
	urlID     imageID
	hasDigest bool
	hasURLID  bool // urlID is set: the image has no digest, so its URL was normalised for the key
}

// imageGroup is what a group of a message with images and other segments
// keeps for the image rule.
type imageGroup struct {
	loose CorrelationKey // its loose key
	newer *group         // the next newer group of the loose key
	tail  *group         // the newest group of the loose key, kept by the oldest
	ids   []imageID      // identities seen of its images, those of urls excepted
	urls  []pendingURL   // URLs seen of images with a digest, not yet normalised
	full  bool           // more than maxImageIDs were seen
	sents []adapterSent  // the first send time each adapter gave, up to maxImageIDs

	inlineIDs   [2]imageID // the first identities, URLs and send times, so
	inlineURLs  [2]pendingURL
	inlineSents [2]adapterSent // that a group takes one allocation
}

// pendingURL is the URL of an image, as given, that a group keeps instead of
// its identity until the image rule compares the group with a delivery:
// copies by exact key, the most, need not normalise it. Equal URLs have equal
// identities, so a URL the group has pending is not kept twice.
type pendingURL struct {
	slot uint8
	url  string
}

// maxPendingURLs is how many URLs a group keeps pending; one more normalises
// them, so that a group keeps at most this many of a caller's strings.
const maxPendingURLs = 8

// adapterSent is the send time an adapter gave a group's message. One
// adapter renders one message's send time the same way for every bot, so a
// copy by an adapter the group has has the same send time: a delivery a
// second off is a repeat from a bot that missed the original.
type adapterSent struct {
	adapter string
	sent    time.Duration
}

// sentAgrees reports whether a send time by an adapter agrees with those of
// the group: equal to its adapter's, if the group has one.
func (ig *imageGroup) sentAgrees(adapter string, sent time.Duration) bool {
	for _, as := range ig.sents {
		if as.adapter == adapter {
			return as.sent == sent
		}
	}
	return true
}

// rememberSent records an adapter's send time, if it is the adapter's first.
func (ig *imageGroup) rememberSent(adapter string, sent time.Duration) {
	if sent == unsent || len(ig.sents) == maxImageIDs {
		return
	}
	for _, as := range ig.sents {
		if as.adapter == adapter {
			return
		}
	}
	ig.sents = append(ig.sents, adapterSent{adapter, sent})
}

// eligible reports whether the image rule applies to the message li was
// filled for: it has at most maxLooseImages images and a segment other than
// images and replies.
func (li *looseInfo) eligible() bool {
	return li.images > 0 && li.images <= maxLooseImages && li.others > 0
}

// addImage records the next image: id is the identity its key has (of
// [canon.AppendImageKeyID]; a digest if digest, else its URL identity or
// nothing), url its URL as given, and form[start:end] where id is in the
// canonical form.
func (li *looseInfo) addImage(id []byte, digest bool, url string, start, end int) {
	if li.images++; li.images > maxLooseImages {
		return // too many: the rule does not apply
	}
	slot := uint8(li.images - 1)
	li.spans[slot] = [2]int32{int32(start), int32(end)}
	im := &li.img[slot]
	im.url = url
	switch {
	case digest:
		im.digest, im.hasDigest = maphash.Bytes(li.seed, id), true
	case len(id) > 0:
		im.urlID, im.hasURLID = urlImageID(li.seed, slot, id), true
	}
}

// urlImageID returns the identity of slot's image whose URL identity (of
// [canon.AppendImageURLID]) is id.
func urlImageID(seed maphash.Seed, slot uint8, id []byte) imageID {
	return imageID{slot: slot, isURL: true, host: maphash.Bytes(seed, urlHost(id)), value: maphash.Bytes(seed, id)}
}

// normalizedURLID returns the identity of slot's image whose URL, as given,
// is url.
func normalizedURLID(seed maphash.Seed, slot uint8, url string) imageID {
	var b [256]byte
	return urlImageID(seed, slot, canon.AppendImageURLID(b[:0], url))
}

// identities writes every identity of li's images to ids, normalising the
// URLs of images with a digest, and returns how many it wrote.
func (li *looseInfo) identities(ids *[2 * maxLooseImages]imageID) int {
	n := 0
	for i := range li.images { // li is eligible: at most maxLooseImages
		im := &li.img[i]
		if im.hasDigest {
			ids[n] = imageID{slot: uint8(i), value: im.digest}
			n++
			if im.url != "" {
				ids[n] = normalizedURLID(li.seed, uint8(i), im.url)
				n++
			}
		} else if im.hasURLID {
			ids[n] = im.urlID
			n++
		}
	}
	return n
}

// setKey sets the loose key from the canonical form, whose image identities
// are at li.spans: the digest of the form with each of them empty.
func (li *looseInfo) setKey(form []byte) {
	var stack [512]byte
	buf, at := stack[:0], int32(0)
	for _, sp := range li.spans[:li.images] { // li is eligible: at most maxLooseImages
		buf = append(append(buf, form[at:sp[0]]...), "0:,"...)
		at = sp[1]
	}
	sum := sha256.Sum256(append(buf, form[at:]...))
	li.key = CorrelationKey(sum[:len(CorrelationKey{})])
}

// urlHost returns the host of a URL identity ("url:" and a normalised URL).
func urlHost(id []byte) []byte {
	u := id[len("url:"):]
	for i, c := range u {
		if c == '/' || c == '?' {
			return u[:i]
		}
	}
	return u
}

// differs reports whether an image of ids is known to differ from the
// group's: two digests, or two URLs of one host, that are not equal. A group
// that saw too many identities to keep differs from everything. The group's
// pending URLs are settled first.
func (ig *imageGroup) differs(seed maphash.Seed, ids []imageID) bool {
	ig.settle(seed)
	if ig.full {
		return true
	}
	for _, id := range ids {
		for _, r := range ig.ids {
			if r.slot == id.slot && r.isURL == id.isURL && r.host == id.host && r.value != id.value {
				return true
			}
		}
	}
	return false
}

// remember adds the identities the group has not seen.
func (ig *imageGroup) remember(ids []imageID) {
next:
	for _, id := range ids {
		for _, r := range ig.ids {
			if r == id {
				continue next
			}
		}
		if len(ig.ids) == maxImageIDs {
			ig.full = true
			return
		}
		ig.ids = append(ig.ids, id)
	}
}

// rememberURLs keeps pending the URLs of li's images with a digest that the
// group does not have pending. The other identities of a copy by exact key
// are the group's own: its key holds them.
func (ig *imageGroup) rememberURLs(seed maphash.Seed, li *looseInfo) {
	for i := range li.images { // li is eligible: at most maxLooseImages
		if im := &li.img[i]; im.hasDigest && im.url != "" && !ig.full {
			ig.rememberURL(seed, pendingURL{uint8(i), im.url})
		}
	}
}

// rememberURL keeps u pending unless the group has it pending already,
// settling the pending URLs first when there are maxPendingURLs.
func (ig *imageGroup) rememberURL(seed maphash.Seed, u pendingURL) {
	for _, p := range ig.urls {
		if p == u {
			return
		}
	}
	if len(ig.urls) == maxPendingURLs {
		ig.settle(seed)
	}
	ig.urls = append(ig.urls, u)
}

// settle normalises the pending URLs into identities.
func (ig *imageGroup) settle(seed maphash.Seed) {
	for _, p := range ig.urls {
		if ig.full {
			break
		}
		id := normalizedURLID(seed, p.slot, p.url)
		ig.remember([]imageID{id})
	}
	clear(ig.urls)
	ig.urls = ig.urls[:0]
}

// looseJoin places a delivery that joined no group of its key by the image
// rule: into the oldest live group of its loose key it may join, as a
// redelivery if its bot delivered its message id there. It returns nil if
// there is none. c.mu is held.
func (c *EventCorrelator) looseJoin(li *looseInfo, self Participant, sent, now time.Duration) (g *group, n int, dup bool) {
	if sent == unsent {
		return nil, 0, false
	}
	var idBuf [2 * maxLooseImages]imageID
	var ids []imageID // li's identities, once a group is compared with it
	walked := 0
	for cand := c.loose[li.key]; cand != nil && walked < maxLooseWalk; cand = cand.img.newer {
		if walked++; now > cand.expires {
			continue
		}
		if i := cand.indexOf(self.Adapter, self.BotID); i >= 0 {
			if self.MessageID != "" && cand.parts[i].MessageID == self.MessageID {
				c.stats.Duplicates++
				return cand, i + 1, true // a redelivery of a copy that joined by the image rule
			}
			continue
		}
		if cand.sent == unsent || !c.sameTime(cand.sent, sent) || !cand.img.sentAgrees(self.Adapter, sent) {
			continue
		}
		if ids == nil {
			ids = idBuf[:li.identities(&idBuf)]
		}
		if cand.img.differs(c.seed, ids) {
			continue
		}
		cand.add(self)
		cand.img.remember(ids)
		cand.img.rememberSent(self.Adapter, sent)
		if ci := c.chainOf(c.groups[cand.key]); ci != nil {
			ci.index(cand, self, c.hashes(self))
		}
		c.stats.Duplicates++
		c.stats.ImageMatched++
		return cand, len(cand.parts), true
	}
	return nil, 0, false
}

// addLoose puts a new group of a delivery the image rule applies to at the
// end of its loose key's chain. c.mu is held.
func (c *EventCorrelator) addLoose(g *group, li *looseInfo, self Participant) {
	ig := &imageGroup{loose: li.key}
	ig.ids, ig.urls, ig.sents = ig.inlineIDs[:0], ig.inlineURLs[:0], ig.inlineSents[:0]
	for i := range li.images { // li is eligible: at most maxLooseImages
		switch im := &li.img[i]; {
		case im.hasDigest:
			ig.remember([]imageID{{slot: uint8(i), value: im.digest}})
		case im.hasURLID:
			ig.remember([]imageID{im.urlID})
		}
	}
	ig.rememberURLs(c.seed, li)
	ig.rememberSent(self.Adapter, g.sent)
	g.img = ig
	if head := c.loose[li.key]; head != nil {
		head.img.tail.img.newer = g
		head.img.tail = g
	} else {
		c.loose[li.key] = g
		g.img.tail = g
	}
}

// removeLoose takes g, the oldest group of its loose key, out of the loose
// key's chain. c.mu is held.
func (c *EventCorrelator) removeLoose(g *group) {
	if g.img == nil {
		return
	}
	if next := g.img.newer; next != nil {
		c.loose[g.img.loose] = next
		next.img.tail = g.img.tail
	} else {
		delete(c.loose, g.img.loose)
	}
	g.img.newer, g.img.tail = nil, nil
}
