package edge_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/dedupehttp/edge"
)

// TestSignedURL signs a status link and serves it through RequireAuth over
// a real server: it opens the endpoint until it expires, and any change to
// it, or another key, is refused.
func TestSignedURL(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	now := time.Unix(1764600000, 0)
	clock := func() time.Time { return now }
	srv := httptest.NewServer(edge.RequireAuth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
	}), edge.SignedURL(key, clock)))
	defer srv.Close()
	get := func(t *testing.T, target string) int {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + target)
		require.NoError(t, err)
		_ = resp.Body.Close()
		return resp.StatusCode
	}

	signed, err := edge.SignURL(key, "/queue/ABCDEF", now.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, get(t, signed))

	other, err := edge.SignURL([]byte("another key, another key, anothe"), "/queue/ABCDEF", now.Add(time.Hour))
	require.NoError(t, err)
	expired, err := edge.SignURL(key, "/queue/ABCDEF", now.Add(-time.Second))
	require.NoError(t, err)
	withQuery, err := edge.SignURL(key, "/queue/ABCDEF?view=full", now.Add(time.Hour))
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, get(t, withQuery))

	u, err := url.Parse(signed)
	require.NoError(t, err)
	q := u.Query()
	later := url.Values{"expires": {"9999999999"}, "sig": q["sig"]}
	for name, target := range map[string]string{
		"another key":        other,
		"expired":            expired,
		"another path":       strings.Replace(signed, "ABCDEF", "ABCDEG", 1),
		"later expiry":       "/queue/ABCDEF?" + later.Encode(),
		"parameter added":    signed + "&view=full",
		"parameter removed":  strings.Replace(withQuery, "&view=full", "", 1),
		"two signatures":     signed + "&sig=" + q.Get("sig"),
		"no signature":       "/queue/ABCDEF?expires=" + q.Get("expires"),
		"no expiry":          "/queue/ABCDEF?sig=" + q.Get("sig"),
		"not signed at all":  "/queue/ABCDEF",
		"malformed query":    signed + "&%zz",
		"signature mangled":  signed[:len(signed)-2],
		"expiry not integer": strings.Replace(signed, "expires=", "expires=x", 1),
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, http.StatusUnauthorized, get(t, target), target)
		})
	}

	now = now.Add(2 * time.Hour)
	assert.Equal(t, http.StatusUnauthorized, get(t, signed), "expired since")
}

// TestSignURLErrors refuses what it cannot sign.
func TestSignURLErrors(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	_, err := edge.SignURL(nil, "/queue/x", exp)
	assert.Error(t, err)
	_, err = edge.SignURL([]byte("k"), "/queue/x?sig=1", exp)
	assert.Error(t, err)
	_, err = edge.SignURL([]byte("k"), "/queue/x?expires=1", exp)
	assert.Error(t, err)
	_, err = edge.SignURL([]byte("k"), "http://[::1", exp)
	assert.Error(t, err)
	signed, err := edge.SignURL([]byte("k"), "https://gw.example.com/queue/x", exp)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(signed, "https://gw.example.com/queue/x?expires="), signed)

	r := httptest.NewRequest(http.MethodGet, "/queue/x?expires=1&sig=a", nil)
	assert.False(t, edge.SignedURL(nil, nil)(r), "an empty key accepts nothing")
}
