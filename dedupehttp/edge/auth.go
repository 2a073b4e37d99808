package edge

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// RequireAuth returns a handler that serves a request with h only when
// verify returns true for it, and answers any other 401 Unauthorized with
// "WWW-Authenticate: Bearer" and Cache-Control no-store, without calling h.
// verify runs on every request, before h reads anything; a nil verify
// refuses every request. Use it to protect the queue status endpoint (see
// the package documentation) or any other management handler.
func RequireAuth(h http.Handler, verify func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if verify == nil || !verify(r) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			w.Header().Set("Cache-Control", "no-store")
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// BearerToken returns a verifier for [RequireAuth] that accepts a request
// whose Authorization header is "Bearer " followed by token (RFC 6750; the
// scheme is case-insensitive). The comparison takes the same time whatever
// the request sends. An empty token accepts nothing, so that an unset
// environment variable locks the endpoint rather than opening it.
func BearerToken(token string) func(*http.Request) bool {
	if token == "" {
		return func(*http.Request) bool { return false }
	}
	want := sha256.Sum256([]byte(token))
	return func(r *http.Request) bool {
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return false
		}
		sum := sha256.Sum256([]byte(strings.TrimSpace(got)))
		return subtle.ConstantTimeCompare(sum[:], want[:]) == 1
	}
}
