package dedupe

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gatewaykit/dedupe/internal/canon"
)

// Bot is a bot account as connected through one adapter.
type Bot struct {
	Adapter string // the adapter's name, as in [Identity.Adapter]
	ID      string // the account id, which is also the user id its messages carry
}

// Handler handles the deliveries a [Router] dispatches to it. obs is the
// correlator's verdict on the delivery (see [Correlator.Observe]).
type Handler interface {
	HandleEvent(ctx context.Context, ev *Event, obs Observation) error
}

// HandlerFunc adapts a function to a [Handler].
type HandlerFunc func(ctx context.Context, ev *Event, obs Observation) error

// HandleEvent calls f(ctx, ev, obs).
func (f HandlerFunc) HandleEvent(ctx context.Context, ev *Event, obs Observation) error {
	return f(ctx, ev, obs)
}

// Router observes every delivery with a [Correlator], guards against bot loops
// and runs the handlers whose routes match. It also keeps the registry of the
// gateway's own bots, which the loop guard and the choice of a reply bot use.
//
// A route names an event kind and optionally its detail type: "message",
// "message.group", "notice.group_increase", "request.friend". A route matches
// deliveries of its kind, and of its detail type if it names one (the message,
// notice or request type). A normal route skips deliveries the correlator marked
// duplicate; a route prefixed with '!' ("!message.group") sees every delivery.
//
// Dispatch drops a message whose sender is a registered bot other than the
// receiving one (see [Router.IsBotLoop]) after observing it, before any
// handler. With a nil Correlator, cross-adapter dedupe is off: nothing is
// observed and nothing is filtered, neither duplicates nor bot loops.
//
// A Router is safe for concurrent use. Handle and RegisterBot may be called while
// Dispatch runs; a dispatch sees the handlers and bots of the moment it began.
type Router struct {
	c *Correlator

	mu       sync.Mutex // serialises writers of the two snapshots below
	bots     atomic.Pointer[botSet]
	handlers atomic.Pointer[[]*routedHandler]
}

// botSet is an immutable snapshot of the registered bots.
type botSet struct {
	list []Bot               // in registration order
	ids  map[string]struct{} // the registered bot ids, of any adapter
}

// routedHandler is a handler with all the routes it was registered for.
type routedHandler struct {
	h      Handler
	routes []route
}

type route struct {
	text   string
	kind   string
	detail string // "" matches every detail type
	all    bool   // '!': duplicates too
}

// NewRouter returns a router that observes deliveries with c. A nil c turns
// cross-adapter dedupe off.
func NewRouter(c *Correlator) *Router {
	return &Router{c: c}
}

// Correlator returns the router's correlator, which may be nil.
func (r *Router) Correlator() *Correlator {
	return r.c
}

// RegisterBot adds a bot of the gateway to the registry. Registering a bot
// again changes nothing; its place in the registration order is kept.
func (r *Router) RegisterBot(adapter, botID string) {
	r.updateBots(func(list []Bot) []Bot {
		if slices.Contains(list, Bot{adapter, botID}) {
			return list
		}
		return append(list, Bot{adapter, botID})
	})
}

// UnregisterBot removes a bot from the registry, if it is there.
func (r *Router) UnregisterBot(adapter, botID string) {
	r.updateBots(func(list []Bot) []Bot {
		return slices.DeleteFunc(list, func(b Bot) bool { return b == Bot{adapter, botID} })
	})
}

func (r *Router) updateBots(f func([]Bot) []Bot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var old []Bot
	if s := r.bots.Load(); s != nil {
		old = s.list
	}
	list := f(slices.Clone(old))
	s := &botSet{list: list, ids: make(map[string]struct{}, len(list))}
	for _, b := range list {
		s.ids[b.ID] = struct{}{}
	}
	r.bots.Store(s)
}

func (r *Router) botSet() *botSet {
	if s := r.bots.Load(); s != nil {
		return s
	}
	return &botSet{}
}

// Bots returns the registered bots in registration order.
func (r *Router) Bots() []Bot {
	return slices.Clone(r.botSet().list)
}

// IsBotLoop reports whether ev is a message sent by a registered bot other than
// the bot that received it: one of the gateway's bots talking to another, which
// must not be answered. A bot's own messages are not loops.
func (r *Router) IsBotLoop(ev *Event) bool {
	if ev.Kind != "message" || ev.UserID == "" || ev.UserID == ev.Identity.BotID {
		return false
	}
	_, ok := r.botSet().ids[ev.UserID]
	return ok
}

// MentionedBots returns the registered bots that ev mentions with an "at"
// segment, in registration order. A bot registered through several adapters is
// returned once for each.
func (r *Router) MentionedBots(ev *Event) []Bot {
	if ev.Kind != "message" {
		return nil
	}
	var targets []string
	for _, seg := range ev.Segments {
		if seg.Type == "at" {
			targets = append(targets, string(canon.AppendScalar(nil, firstOf(seg.Data, "qq", "target"))))
		}
	}
	var out []Bot
	for _, b := range r.botSet().list {
		if slices.Contains(targets, b.ID) {
			out = append(out, b)
		}
	}
	return out
}

// BotsForEvent returns the deliveries of ev's logical event observed so far, in
// arrival order, including those that arrived after ev: which bots received it,
// and under which message ids. Without a correlator, or before ev is observed,
// it returns ev's own delivery.
func (r *Router) BotsForEvent(ev *Event) []Participant {
	if r.c != nil {
		if parts, ok := r.c.participants(ev); ok {
			return parts
		}
	}
	return []Participant{ev.participant()}
}

// PickReplyBot chooses the bot that should answer ev: the first mentioned
// registered bot (see [Router.MentionedBots]), so the bot a user @-ed answers
// even when another bot's copy arrived first; else the primary delivery of ev's
// group, if its bot is still registered; else the bot that received ev. The
// MessageID is that bot's id for the message, for a quoted reply, when its copy
// has been observed, and empty otherwise.
func (r *Router) PickReplyBot(ev *Event) Participant {
	parts := r.BotsForEvent(ev)
	byBot := func(adapter, id string) Participant {
		for _, p := range parts {
			if p.Adapter == adapter && p.BotID == id {
				return p
			}
		}
		return Participant{Adapter: adapter, BotID: id}
	}
	if m := r.MentionedBots(ev); len(m) > 0 {
		return byBot(m[0].Adapter, m[0].ID)
	}
	if r.c != nil {
		if obs, ok := r.c.Correlation(ev); ok && slices.Contains(r.botSet().list, Bot{obs.Primary.Adapter, obs.Primary.BotID}) {
			return obs.Primary
		}
	}
	return ev.participant()
}

// Handle registers h for route, or for several routes separated by commas
// ("message.group, !notice"). A handler runs at most once per delivery, however
// many of its routes match: registrations of equal handlers (the same pointer,
// for instance) are merged. Functions cannot be compared, so each Handle call
// with a [HandlerFunc] is a handler of its own; give it all its routes in one
// call. Handlers run in the order of their first registration.
//
// Handle panics if h is nil or a route is malformed (empty, or with an empty
// kind or detail type), as [net/http.ServeMux.Handle] does.
func (r *Router) Handle(route string, h Handler) {
	if h == nil {
		panic("dedupe: Router.Handle: nil handler")
	}
	routes, err := parseRoutes(route)
	if err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var old []*routedHandler
	if p := r.handlers.Load(); p != nil {
		old = *p
	}
	hs := make([]*routedHandler, 0, len(old)+1)
	merged := false
	for _, e := range old {
		if !merged && sameHandler(e.h, h) {
			e = &routedHandler{h: e.h, routes: append(slices.Clip(e.routes), routes...)}
			merged = true
		}
		hs = append(hs, e)
	}
	if !merged {
		hs = append(hs, &routedHandler{h: h, routes: routes})
	}
	r.handlers.Store(&hs)
}

// sameHandler reports whether a and b are equal, treating handlers that cannot
// be compared (functions, or structs holding them) as different.
func sameHandler(a, b Handler) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

func parseRoutes(s string) ([]route, error) {
	var routes []route
	for text := range strings.SplitSeq(s, ",") {
		text = strings.TrimSpace(text)
		rt := route{text: text}
		spec, all := strings.CutPrefix(text, "!")
		rt.all = all
		kind, detail, hasDetail := strings.Cut(spec, ".")
		rt.kind, rt.detail = kind, detail
		if kind == "" || (hasDetail && detail == "") || strings.ContainsAny(spec, "! \t") {
			return nil, fmt.Errorf("dedupe: malformed route %q", text)
		}
		routes = append(routes, rt)
	}
	return routes, nil
}

// matches reports whether the handler wants a delivery.
func (e *routedHandler) matches(kind, detail string, dup bool) (route, bool) {
	for _, rt := range e.routes {
		if rt.kind == kind && (rt.detail == "" || rt.detail == detail) && (rt.all || !dup) {
			return rt, true
		}
	}
	return route{}, false
}

// Dispatch observes ev (when the router has a correlator), drops it if it is a
// bot loop, and runs every handler with a matching route, once each, in
// registration order, on the caller's goroutine. A handler's error does not
// stop the others; Dispatch returns them joined, each wrapped with the route
// that matched. If ctx is done before a handler runs, Dispatch stops and
// includes ctx.Err(). A delivery that no route matches, or that is dropped, is
// not an error. Dispatching the same *Event again runs its handlers again, with
// the observation made the first time.
func (r *Router) Dispatch(ctx context.Context, ev *Event) error {
	var obs Observation
	if r.c != nil {
		obs = r.c.Observe(ev)
		if r.IsBotLoop(ev) {
			return nil
		}
	} else {
		obs = Observation{Primary: ev.participant(), Participants: []Participant{ev.participant()}}
	}
	p := r.handlers.Load()
	if p == nil {
		return nil
	}
	detail := ev.detailType()
	var errs []error
	for _, e := range *p {
		rt, ok := e.matches(ev.Kind, detail, obs.Duplicate)
		if !ok {
			continue
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, err)
			break
		}
		if err := e.h.HandleEvent(ctx, ev, obs); err != nil {
			errs = append(errs, fmt.Errorf("dedupe: route %s: %w", rt.text, err))
		}
	}
	return errors.Join(errs...)
}
