package multibot

import (
	"cmp"
	"slices"
	"sync"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/internal/canon"
)

// Bot is a bot account as connected through one adapter.
type Bot struct {
	Adapter string // the adapter's name, as in [dedupe.Identity.Adapter]
	ID      string // the account id, which is also the user id its messages carry
}

// Registry is the set of the gateway's own bots, in registration order. Its
// zero value is an empty registry ready to use. A Registry is safe for
// concurrent use; each method sees the bots of the moment it is called.
type Registry struct {
	mu    sync.RWMutex
	order map[Bot]uint64   // registration number of each bot
	byID  map[string][]Bot // the bots of each account id, of any adapter
	next  uint64
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{}
}

// Register adds a bot of the gateway to the registry. Registering a bot
// again changes nothing; its place in the registration order is kept.
func (r *Registry) Register(adapter, botID string) {
	b := Bot{adapter, botID}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.order[b]; ok {
		return
	}
	if r.order == nil {
		r.order, r.byID = map[Bot]uint64{}, map[string][]Bot{}
	}
	r.next++
	r.order[b] = r.next
	r.byID[botID] = append(r.byID[botID], b)
}

// Unregister removes a bot from the registry, if it is there.
func (r *Registry) Unregister(adapter, botID string) {
	b := Bot{adapter, botID}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.order[b]; !ok {
		return
	}
	delete(r.order, b)
	if same := slices.DeleteFunc(r.byID[botID], func(x Bot) bool { return x == b }); len(same) > 0 {
		r.byID[botID] = same
	} else {
		delete(r.byID, botID)
	}
}

// Contains reports whether the bot is registered.
func (r *Registry) Contains(adapter, botID string) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	_, ok := r.order[Bot{adapter, botID}]
	return ok
}

// Bots returns the registered bots in registration order.
func (r *Registry) Bots() []Bot {
	r.mu.RLock()
	out := make([]Bot, 0, len(r.order))
	for b := range r.order {
		out = append(out, b)
	}
	r.sortLocked(out)
	r.mu.RUnlock()
	return out
}

// sortLocked sorts registered bots by registration order. r.mu is held.
func (r *Registry) sortLocked(bots []Bot) {
	slices.SortFunc(bots, func(a, b Bot) int { return cmp.Compare(r.order[a], r.order[b]) })
}

// IsBotLoop reports whether ev is a message sent by a registered bot other than
// the bot that received it: one of the gateway's bots talking to another, which
// must not be answered. A bot's own messages are not loops.
func (r *Registry) IsBotLoop(ev *dedupe.Event) bool {
	if ev.Kind != "message" || ev.UserID == "" || ev.UserID == ev.Identity.BotID {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.byID[ev.UserID]) > 0
}

// MentionedBots returns the registered bots that ev mentions with an "at"
// segment (data "qq", else "target"; numbers and strings alike), in
// registration order. A bot registered through several adapters is returned
// once for each.
func (r *Registry) MentionedBots(ev *dedupe.Event) []Bot {
	if ev.Kind != "message" {
		return nil
	}
	var out []Bot
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, seg := range ev.Segments {
		if seg.Type != "at" {
			continue
		}
		var tmp [64]byte
		for _, b := range r.byID[string(canon.AppendScalar(tmp[:0], atTarget(seg.Data)))] {
			if !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	r.sortLocked(out)
	return out
}

// atTarget returns the target of an "at" segment: data "qq", else "target".
func atTarget(data map[string]any) any {
	if v := data["qq"]; v != nil {
		return v
	}
	return data["target"]
}
