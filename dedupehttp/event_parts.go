package dedupehttp

import (
	"slices"

	"github.com/gatewaykit/dedupe/internal/jsonscan"
	"github.com/gatewaykit/dedupe/platform"
)

// What [NewAsyncEvents] queues for each event of a batch: its part of the
// batch, not the whole of it.

// partDepth bounds the nesting the scanner of parts reads; the platform's
// parser read the body first, with a bound of its own.
const partDepth = 10000

// eventParts cuts a batch into the parts of its events: the batch's JSON
// with every event but one left out, and every array element that holds
// only events left out (another entry, another WhatsApp change), so that
// what the events share (LINE's destination, a change's metadata) stays.
type eventParts struct {
	body   []byte
	starts []int // where each event begins in body
	ends   []int
	ok     bool  // the events are slices of body, in order: parts can be cut
	root   *node // the body's tree, made by the first part
}

// newEventParts returns the parts of the batch body whose events are evs.
// When an event's Raw is not a slice of body (an Events func that copies),
// ok is false and each part is the whole body.
func newEventParts(body []byte, evs []platform.Event) *eventParts {
	p := &eventParts{body: body, starts: make([]int, len(evs)), ends: make([]int, len(evs)), ok: true}
	for i, ev := range evs {
		off, ok := offsetIn(body, ev.Raw)
		if !ok || i > 0 && off < p.ends[i-1] {
			p.ok = false
			return p
		}
		p.starts[i], p.ends[i] = off, off+len(ev.Raw)
	}
	return p
}

// offsetIn returns where sub begins in body, if it is a slice of it.
func offsetIn(body, sub []byte) (int, bool) {
	if len(sub) == 0 || cap(sub) > cap(body) {
		return 0, false
	}
	off := cap(body) - cap(sub)
	if off+len(sub) > len(body) || &body[off] != &sub[0] {
		return 0, false
	}
	return off, true
}

// part returns the part of event i: a new slice, or the whole body when
// parts cannot be cut.
func (p *eventParts) part(i int) []byte {
	if !p.ok {
		return p.body
	}
	if p.root == nil {
		p.root = p.tree(p.body, 0)
	}
	out := make([]byte, 0, 256+p.ends[i]-p.starts[i])
	return p.emit(out, p.root, i)
}

// A node is a value of the batch: a leaf, kept or left out whole, or an
// array or object that holds events, whose members it lists.
type node struct {
	start, end int    // in the body
	kind       byte   // '[' or '{'; 0 for a leaf
	names      []byte // an object's member names, quoted, each ending in ':'
	nameEnds   []int  // where each name ends in names
	kids       []*node
}

// events reports whether an event begins in body[a:b], and whether a value
// there is exactly one event.
func (p *eventParts) events(a, b int) (holds, exact bool) {
	k, found := slices.BinarySearch(p.starts, a)
	return k < len(p.starts) && p.starts[k] < b, found && p.ends[k] == b
}

// tree returns the node of the value v, which begins at off in the body:
// a leaf unless it holds an event without being one. The body is read once
// for each level of nesting that holds events.
func (p *eventParts) tree(v []byte, off int) *node {
	n := &node{start: off, end: off + len(v)}
	if holds, exact := p.events(n.start, n.end); !holds || exact {
		return n
	}
	sc := jsonscan.NewScanner(v)
	switch n.kind = sc.Peek(); n.kind {
	case '[':
		for more := !sc.Open(); more; {
			e, ok := sc.Skip(partDepth)
			if !ok {
				break // unreachable: the platform read v whole
			}
			n.kids = append(n.kids, p.tree(e, off+cap(v)-cap(e)))
			if more, ok = sc.Next(']'); !ok {
				break
			}
		}
	case '{':
		for more := !sc.Open(); more && sc.Peek() == '"'; {
			name, _, ok := sc.Quoted()
			if !ok || !sc.Colon() {
				break
			}
			m, ok := sc.Skip(partDepth)
			if !ok {
				break
			}
			n.names = append(append(append(n.names, '"'), name...), '"', ':')
			n.nameEnds = append(n.nameEnds, len(n.names))
			n.kids = append(n.kids, p.tree(m, off+cap(v)-cap(m)))
			if more, ok = sc.Next('}'); !ok {
				break
			}
		}
	default:
		n.kind = 0
	}
	return n
}

// emit appends to out the value of n with the events other than i left
// out: in an array, the elements that hold other events but not i.
func (p *eventParts) emit(out []byte, n *node, i int) []byte {
	if n.kind == 0 {
		return append(out, p.body[n.start:n.end]...)
	}
	out = append(out, n.kind)
	kept, from := 0, 0
	for k, kid := range n.kids {
		if n.kind == '[' {
			mine := p.starts[i] >= kid.start && p.starts[i] < kid.end
			if holds, _ := p.events(kid.start, kid.end); holds && !mine {
				continue
			}
		}
		if kept++; kept > 1 {
			out = append(out, ',')
		}
		if n.kind == '{' {
			if k > 0 {
				from = n.nameEnds[k-1]
			}
			out = append(out, n.names[from:n.nameEnds[k]]...)
		}
		out = p.emit(out, kid, i)
	}
	return append(out, n.kind+2) // ']' and '}' follow '[' and '{' by two
}
