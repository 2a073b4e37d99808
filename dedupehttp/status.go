package dedupehttp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"path"
	"sync"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/queue"
)

// statusTable keeps the states of the memory tier's messages for
// [Async.Status]: the live ones, and the settled ones for [queue.DefaultRetention],
// at most [queue.DefaultMaxSettled] of them.
type statusTable struct {
	mu      sync.Mutex
	m       map[string]*queue.Entry
	settled []string // ids of done or failed entries, oldest first
}

// set records that the message key queued as id is in state s.
func (t *statusTable) set(id string, key dedupe.Key, s queue.State) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]*queue.Entry)
	}
	e, ok := t.m[id]
	if !ok {
		e = &queue.Entry{ID: id, Key: key, Accepted: now}
		t.m[id] = e
	}
	e.State, e.Updated = s, now
	switch {
	case s == queue.StateProcessing:
		e.Attempts = 1
	case !s.Live():
		t.settled = append(t.settled, id)
	}
	t.forget(now)
}

// forget drops the settled entries past the retention or the bound.
func (t *statusTable) forget(now time.Time) {
	n := 0
	for ; n < len(t.settled); n++ {
		e := t.m[t.settled[n]]
		if len(t.settled)-n <= queue.DefaultMaxSettled && now.Sub(e.Updated) < queue.DefaultRetention {
			break
		}
		delete(t.m, e.ID)
	}
	t.settled = t.settled[n:]
}

// get returns the entry of id.
func (t *statusTable) get(id string) (queue.Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forget(time.Now())
	if e, ok := t.m[id]; ok {
		return *e, true
	}
	return queue.Entry{}, false
}

// Status returns the state of the message a queued as id, as [HeaderQueueID]
// told the platform: from the memory tier, which keeps the state of a done or
// failed message for [queue.DefaultRetention] (at most the last
// [queue.DefaultMaxSettled]), or else from the [queue.Queue] of [WithQueue] or
// [WithOverflow], for its own retention and whichever process queued it. ok
// is false for an id neither knows. It is safe to call concurrently with
// ServeHTTP.
func (a *Async) Status(ctx context.Context, id string) (e queue.Entry, ok bool, err error) {
	if e, ok := a.states.get(id); ok {
		return e, true, nil
	}
	if a.c.queue == nil {
		return queue.Entry{}, false, nil
	}
	return a.c.queue.Status(ctx, id)
}

// statusJSON is the answer of [Async.StatusHandler].
type statusJSON struct {
	ID       string    `json:"id"`
	State    string    `json:"state,omitempty"`
	Attempts int       `json:"attempts,omitempty"`
	Accepted time.Time `json:"accepted_at,omitzero"`
	Updated  time.Time `json:"updated_at,omitzero"`
	Reason   string    `json:"reason,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// StatusHandler returns an [http.Handler] that answers GET (and HEAD) of a
// queue id with the message's state as [Async.Status] finds it, in JSON:
//
//	{"id":"…","state":"processing","attempts":1,"accepted_at":"…","updated_at":"…"}
//
// state is "queued", "processing", "done" or "failed"; a failed message has
// a "reason" too. An id it does not
// know (never queued, or forgotten after the retention) is answered 404, a
// queue that fails 503, other methods 405. The id is the path value "id" of
// the pattern it is mounted on, or else the last element of the path:
//
//	http.Handle("GET /queue/{id}", a.StatusHandler())
//
// Guard it with edge.RequireAuth (dedupehttp/edge) if its states are private.
func (a *Async) StatusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeStatus(w, http.StatusMethodNotAllowed, statusJSON{Error: "method not allowed"})
			return
		}
		id := r.PathValue("id")
		if id == "" {
			id = path.Base(r.URL.Path)
		}
		e, ok, err := a.Status(r.Context(), id)
		switch {
		case err != nil:
			a.c.log(r.Context(), slog.LevelWarn, "dedupe: dedupehttp: queue status failed", slog.Any("error", err))
			writeStatus(w, http.StatusServiceUnavailable, statusJSON{ID: id, Error: "queue unavailable"})
		case !ok:
			writeStatus(w, http.StatusNotFound, statusJSON{ID: id, Error: "unknown queue id"})
		default:
			writeStatus(w, http.StatusOK, statusJSON{ID: id, State: e.State.String(), Attempts: e.Attempts,
				Accepted: e.Accepted.UTC(), Updated: e.Updated.UTC(), Reason: e.Reason})
		}
	})
}

func writeStatus(w http.ResponseWriter, code int, s statusJSON) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(s)
}
