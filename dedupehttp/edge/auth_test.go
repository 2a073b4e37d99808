package edge_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe/dedupehttp/edge"
)

// TestRequireAuth serves a protected handler over a real server: only a
// request the verifier accepts reaches it.
func TestRequireAuth(t *testing.T) {
	reached := 0
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached++
		_, _ = io.WriteString(w, "state")
	})
	for _, tc := range []struct {
		name   string
		verify func(*http.Request) bool
		auth   string
		want   int
	}{
		{"right token", edge.BearerToken("t0ken"), "Bearer t0ken", http.StatusOK},
		{"scheme in lower case", edge.BearerToken("t0ken"), "bearer t0ken", http.StatusOK},
		{"no header", edge.BearerToken("t0ken"), "", http.StatusUnauthorized},
		{"wrong token", edge.BearerToken("t0ken"), "Bearer t0kem", http.StatusUnauthorized},
		{"token prefix", edge.BearerToken("t0ken"), "Bearer t0k", http.StatusUnauthorized},
		{"other scheme", edge.BearerToken("t0ken"), "Basic t0ken", http.StatusUnauthorized},
		{"no scheme", edge.BearerToken("t0ken"), "t0ken", http.StatusUnauthorized},
		{"empty token configured", edge.BearerToken(""), "Bearer ", http.StatusUnauthorized},
		{"nil verifier", nil, "Bearer t0ken", http.StatusUnauthorized},
		{"source ranges as the verifier", edge.Sources{Allow: loopbackRange()}.Allows, "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(edge.RequireAuth(h, tc.verify))
			defer srv.Close()
			before := reached
			req, err := http.NewRequest(http.MethodGet, srv.URL+"/queue/x", nil)
			require.NoError(t, err)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := srv.Client().Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, tc.want, resp.StatusCode)
			if tc.want != http.StatusOK {
				assert.Equal(t, before, reached, "the handler is not reached")
				assert.Equal(t, "Bearer", resp.Header.Get("WWW-Authenticate"))
				assert.NotContains(t, string(body), "state")
				return
			}
			assert.Equal(t, before+1, reached)
		})
	}
}
