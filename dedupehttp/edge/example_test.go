package edge_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/gatewaykit/dedupe/dedupehttp/edge"
)

// A gateway behind a load balancer at 10.0.0.0/8 accepts Telegram's
// deliveries only: the load balancer's X-Forwarded-For is believed, a
// client's own is not.
func ExampleSources() {
	src := edge.Sources{
		Allow:          edge.TelegramRanges(),
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	}
	for _, c := range []struct{ peer, xff string }{
		{"10.0.0.5:40000", "149.154.167.99"},              // Telegram, through the load balancer
		{"10.0.0.5:40000", "149.154.167.99, 203.0.113.9"}, // a client forging the header
		{"203.0.113.9:5555", "149.154.167.99"},            // the same, straight to the server
	} {
		r := httptest.NewRequest(http.MethodPost, "/telegram", nil)
		r.RemoteAddr = c.peer
		r.Header.Set("X-Forwarded-For", c.xff)
		client, _ := src.Client(r)
		fmt.Println(client, src.Allows(r))
	}
	// Output:
	// 149.154.167.99 true
	// 203.0.113.9 false
	// 203.0.113.9 false
}

// The status endpoint of an Async answers only the callers that hold the
// token; a handler stands in for a.StatusHandler() here.
func ExampleRequireAuth() {
	status := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"state":"done"}`) })
	h := edge.RequireAuth(status, edge.BearerToken("t0ken")) // os.Getenv("STATUS_TOKEN") in a program
	for _, auth := range []string{"", "Bearer t0ken"} {
		r := httptest.NewRequest(http.MethodGet, "/queue/abc", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		fmt.Println(w.Code)
	}
	// Output:
	// 401
	// 200
}

// A status link that opens the endpoint for an hour, to whoever holds it.
func ExampleSignURL() {
	key := []byte("a key of at least 32 random bytes")
	now := time.Unix(1764600000, 0)
	link, err := edge.SignURL(key, "/queue/GQ7ZJQ2W", now.Add(time.Hour))
	if err != nil {
		fmt.Println(err)
		return
	}
	verify := edge.SignedURL(key, func() time.Time { return now })
	fmt.Println(verify(httptest.NewRequest(http.MethodGet, link, nil)))
	fmt.Println(verify(httptest.NewRequest(http.MethodGet, "/queue/GQ7ZJQ2W", nil)))
	// Output:
	// true
	// false
}
