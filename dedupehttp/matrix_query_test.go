package dedupehttp_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/dedupehttp"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// TestMatrixQueryTokenMismatchRefused serves 20 Matrix transactions through
// Events, each with the right Authorization header and an access_token query
// parameter that is another token: the Application Service API asks that
// both match when both are given, so each is answered 401 and no event
// runs. Before, the query was not read: 20 of 20 were accepted, the first
// running the transaction's two events. A transaction whose parameter is the
// hs_token runs.
func TestMatrixQueryTokenMismatchRefused(t *testing.T) {
	const hsToken = "the-hs-token-of-the-bridge"
	s := platformtest.NewSigner("matrix", hsToken)
	ran := 0
	h := dedupehttp.Events(dedupe.New(nil), s.Preset(platform.Matrix), func(*http.Request, platform.Event) error {
		ran++
		return nil
	}, dedupehttp.WithClock(at), dedupehttp.WithLogger(quiet))
	txn := platformFixture(t, "matrix_txn.json")
	put := func(query string) int {
		r := httptest.NewRequest(http.MethodPut, "/_matrix/app/v1/transactions/35"+query, bytes.NewReader(txn))
		for k, v := range s.Sign(txn, clock) {
			r.Header[k] = v
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	accepted := 0
	for i := range 20 {
		if code := put("?access_token=another-token-" + string(rune('a'+i))); code != http.StatusUnauthorized {
			accepted++
		}
	}
	assert.Zero(t, accepted, "transactions with another access_token accepted, of 20")
	assert.Zero(t, ran, "events run")
	assert.Equal(t, http.StatusOK, put("?access_token="+hsToken))
	assert.Equal(t, 2, ran, "the two events of the transaction whose tokens match")
}
