package multibot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/gatewaykit/dedupe"
)

// EventHandler handles the deliveries a [Dispatcher] runs it for. obs is the
// correlator's verdict on the delivery (see [dedupe.EventCorrelator.Observe]).
type EventHandler interface {
	HandleEvent(ctx context.Context, ev *dedupe.Event, obs dedupe.Observation) error
}

// EventHandlerFunc adapts a function to an [EventHandler].
type EventHandlerFunc func(ctx context.Context, ev *dedupe.Event, obs dedupe.Observation) error

// HandleEvent calls f(ctx, ev, obs).
func (f EventHandlerFunc) HandleEvent(ctx context.Context, ev *dedupe.Event, obs dedupe.Observation) error {
	return f(ctx, ev, obs)
}

// Dispatcher observes every delivery with a [dedupe.EventCorrelator], guards
// against bot loops with its [Registry], and runs the handlers whose routes
// match.
//
// A route names an event kind and optionally its detail type: "message",
// "message.group", "notice.group_increase", "request.friend". A route matches
// deliveries of its kind, and of its detail type if it names one (the message,
// notice or request type). A normal route skips deliveries the correlator marked
// duplicate; a route prefixed with '!' ("!message.group") sees every delivery.
//
// Dispatch drops a message whose sender is a registered bot other than the
// receiving one (see [Registry.IsBotLoop]) after observing it, before any
// handler. With a nil correlator, cross-adapter dedupe is off: nothing is
// observed and nothing is filtered, neither duplicates nor bot loops.
//
// A Dispatcher is safe for concurrent use. Handle may be called while Dispatch
// runs; a dispatch runs the handlers of the moment it began.
type Dispatcher struct {
	c    *dedupe.EventCorrelator
	bots *Registry

	mu       sync.Mutex // serialises writers of handlers
	handlers atomic.Pointer[[]*routedHandler]
}

// routedHandler is a handler with all the routes it was registered for.
type routedHandler struct {
	h      EventHandler
	routes []route
}

type route struct {
	text   string
	kind   string
	detail string // "" matches every detail type
	all    bool   // '!': duplicates too
}

// NewDispatcher returns a dispatcher that observes deliveries with c and knows
// the gateway's bots from bots. A nil c turns cross-adapter dedupe off; a nil
// bots gives an empty registry of the dispatcher's own.
func NewDispatcher(c *dedupe.EventCorrelator, bots *Registry) *Dispatcher {
	if bots == nil {
		bots = NewRegistry()
	}
	return &Dispatcher{c: c, bots: bots}
}

// Correlator returns the dispatcher's correlator, which may be nil.
func (d *Dispatcher) Correlator() *dedupe.EventCorrelator {
	return d.c
}

// Bots returns the dispatcher's registry of bots.
func (d *Dispatcher) Bots() *Registry {
	return d.bots
}

// Handle registers h for route, or for several routes separated by commas
// ("message.group, !notice"). A handler runs at most once per delivery, however
// many of its routes match: registrations of equal handlers (the same pointer,
// for instance) are merged. Functions cannot be compared, so each Handle call
// with an [EventHandlerFunc] is a handler of its own; give it all its routes in
// one call. Handlers run in the order of their first registration.
//
// Handle panics if h is nil or a route is malformed (empty, or with an empty
// kind or detail type), as [net/http.ServeMux.Handle] does.
func (d *Dispatcher) Handle(route string, h EventHandler) {
	if h == nil {
		panic("dedupe: multibot: Dispatcher.Handle: nil handler")
	}
	routes, err := parseRoutes(route)
	if err != nil {
		panic(err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var old []*routedHandler
	if p := d.handlers.Load(); p != nil {
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
	d.handlers.Store(&hs)
}

// sameHandler reports whether a and b are equal, treating handlers that cannot
// be compared (functions, or structs holding them) as different.
func sameHandler(a, b EventHandler) (same bool) {
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
			return nil, fmt.Errorf("dedupe: multibot: malformed route %q", text)
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

// detailType returns the second part of an event's route, such as "group" for
// a group message.
func detailType(ev *dedupe.Event) string {
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

// self returns the delivery of ev itself, as a participant.
func self(ev *dedupe.Event) dedupe.Participant {
	return dedupe.Participant{Adapter: ev.Identity.Adapter, BotID: ev.Identity.BotID, MessageID: ev.Identity.MessageID}
}

// Dispatch observes ev (when the dispatcher has a correlator), drops it if it
// is a bot loop, and runs every handler with a matching route, once each, in
// registration order, on the caller's goroutine. A handler's error does not
// stop the others; Dispatch returns them joined, each wrapped with the route
// that matched. If ctx is done before a handler runs, Dispatch stops and
// includes ctx.Err(). A delivery that no route matches, or that is dropped, is
// not an error. Dispatching an Event again observes it again: the correlator
// sees a redelivery, a duplicate while its group is live.
func (d *Dispatcher) Dispatch(ctx context.Context, ev *dedupe.Event) error {
	var obs dedupe.Observation
	if d.c != nil {
		obs = d.c.Observe(ev)
		if d.bots.IsBotLoop(ev) {
			return nil
		}
	} else {
		obs = dedupe.Observation{Primary: self(ev), Participants: []dedupe.Participant{self(ev)}}
	}
	p := d.handlers.Load()
	if p == nil {
		return nil
	}
	detail := detailType(ev)
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
			errs = append(errs, fmt.Errorf("dedupe: multibot: route %s: %w", rt.text, err))
		}
	}
	return errors.Join(errs...)
}
