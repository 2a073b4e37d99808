package dedupehttp

import (
	"log/slog"
	"net/http"
)

// WithSourceFilter answers 403 to requests allow rejects; see dedupehttp/edge.
func WithSourceFilter(allow func(*http.Request) bool) Option {
	return func(c *config) { c.allow = allow }
}

// refuseSource answers 403 Forbidden, with [HeaderVerdict] "forbidden", to
// a request the filter of [WithSourceFilter] rejects, and counts it in
// [Stats].Forbidden; it reports whether it did. Nothing of the request is
// read: it reaches neither the store nor the handler.
func (c *config) refuseSource(w http.ResponseWriter, r *http.Request) bool {
	if c.allow == nil || c.allow(r) {
		return false
	}
	c.stats.forbidden.Add(1)
	c.debug(r.Context(), "dedupe: dedupehttp: request from a source not allowed, refused",
		slog.String("remote_addr", r.RemoteAddr))
	w.Header().Set(HeaderVerdict, "forbidden")
	http.Error(w, "forbidden", http.StatusForbidden)
	return true
}
