package platform_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/platform"
	"github.com/gatewaykit/dedupe/platform/platformtest"
)

// hsToken is the hs_token of the example registration of the Application
// Service API (matrix-org/matrix-spec, content/application-service-api.md).
const hsToken = "312df522183efd404ec1cd22d2ffa4bbc76a8c1ccf541dd692eef281356bb74e"

// asToken is the as_token of the same registration: the token the
// application service sends, never the one it receives.
const asToken = "30c05ae90a248a4188e620216fa72e349803310ec83e2a77b34fe90be6081f46"

// TestMatrixEvents keys the example transaction of the specification
// (testdata/matrix_txn.json): its two events, and not its ephemeral data.
func TestMatrixEvents(t *testing.T) {
	assert.Equal(t, []string{"$143273582443PhrSn:example.org", "$143273582443PhrSo:example.org"},
		eventIDs(t, platform.Matrix, fixture(t, "matrix_txn.json")))

	// The specification's examples give both events one event_id, as its
	// event examples share one: two copies of one event, one key, which the
	// batch API runs once.
	spec := bytes.Replace(fixture(t, "matrix_txn.json"), []byte("PhrSo"), []byte("PhrSn"), 1)
	ids := eventIDs(t, platform.Matrix, spec)
	assert.Equal(t, ids[0], ids[1])

	evs, err := platform.Matrix.Events([]byte(`{"ephemeral":[{"type":"m.typing","room_id":"!r:x"}],"events":[]}`), nil)
	require.NoError(t, err)
	assert.Empty(t, evs, "ephemeral data is not keyed")
	evs, err = platform.Matrix.Events([]byte(`{"events":[{"event_id":"$a"},{"type":"m.room.message"},{"event_id":"$b"}]}`), nil)
	require.NoError(t, err, "an event without event_id does not fail the transaction")
	require.Len(t, evs, 3)
	assert.ErrorIs(t, evs[1].Err, dedupe.ErrNoMessageID, "an event without event_id")
	assert.Equal(t, []string{"$a", "", "$b"}, []string{evs[0].ID, evs[1].ID, evs[2].ID})
	_, err = platform.Matrix.Events([]byte(`{"ephemeral":[]}`), nil)
	assert.ErrorIs(t, err, dedupe.ErrNoMessageID, "events is required")
}

// TestMatrixAuthorization runs the registration's hs_token, and the legacy
// query parameter, which the preset cannot see and so refuses.
func TestMatrixAuthorization(t *testing.T) {
	p := platform.Matrix.WithSecret(hsToken)
	body := fixture(t, "matrix_txn.json")
	for _, auth := range []string{"Bearer " + hsToken, "bearer " + hsToken} {
		_, err := p.Verify(body, http.Header{"Authorization": {auth}}, now)
		require.NoError(t, err, auth)
	}
	_, err := p.Verify(body, http.Header{}, now) // PUT …/transactions/35?access_token=hs_token
	assert.ErrorIs(t, err, platform.ErrUnauthenticated)
	assert.Contains(t, err.Error(), "access_token")
}

// TestMatrixQueryTokenMustMatch sends 100 transactions with the right
// Authorization header and a legacy access_token query parameter that is
// not the hs_token (the as_token, another bridge's, a prefix, empty, or
// given twice): "Application services should ensure both match if both are
// provided" (Application Service API, Authorization), so VerifyRequest
// refuses each. Before, the query was not read and 100 of 100 passed. The
// parameter equal to the token, or absent, passes.
func TestMatrixQueryTokenMustMatch(t *testing.T) {
	p := platform.Matrix.WithSecret(hsToken)
	body := fixture(t, "matrix_txn.json")
	request := func(query string) *http.Request {
		r := httptest.NewRequest(http.MethodPut, "/_matrix/app/v1/transactions/35"+query, nil)
		r.Header.Set("Authorization", "Bearer "+hsToken)
		return r
	}
	wrong := []string{
		"?access_token=" + asToken,
		"?access_token=hs-token-of-another-bridge",
		"?access_token=" + hsToken[:32],
		"?access_token=",
		"?access_token=" + hsToken + "&access_token=" + asToken,
	}
	accepted := 0
	for i := range 100 {
		_, err := p.VerifyRequest(request(wrong[i%len(wrong)]), body, now)
		if err == nil {
			accepted++
			continue
		}
		assert.ErrorIs(t, err, platform.ErrUnauthenticated)
		assert.ErrorContains(t, err, "access_token")
	}
	assert.Zero(t, accepted, "transactions whose access_token differs from the header, accepted of 100")
	for _, query := range []string{"", "?access_token=" + hsToken} {
		_, err := p.VerifyRequest(request(query), body, now)
		assert.NoError(t, err, "query %q", query)
	}
}

// TestMatrixForgeries sends 1,000 forged transactions of ten kinds.
func TestMatrixForgeries(t *testing.T) {
	s := platformtest.NewSigner("matrix", hsToken)
	p := s.Preset(platform.Matrix)
	base := fixture(t, "matrix_txn.json")
	body := func(i int) []byte { return numbered(base, "example text message", i) }
	auth := func(v string) http.Header { return http.Header{"Authorization": {v}} }
	runForgeries(t, hsToken, []forgery{
		{"wrong token", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("matrix", strings.Repeat("z", i%64+1)).Sign(body(i), now)
		}, p},
		{"as_token instead of hs_token", func(i int) ([]byte, http.Header) { return body(i), auth("Bearer " + asToken) }, p},
		{"other service's hs_token", func(i int) ([]byte, http.Header) {
			return body(i), platformtest.NewSigner("matrix", "hs-token-of-another-bridge").Sign(body(i), now)
		}, p},
		{"missing header", func(i int) ([]byte, http.Header) { return body(i), http.Header{} }, p},
		{"malformed header", func(i int) ([]byte, http.Header) {
			return body(i), auth([]string{"Bearer", "Bearer ", hsToken, "Bearer:" + hsToken}[i%4])
		}, p},
		{"truncated token", func(i int) ([]byte, http.Header) { return body(i), auth("Bearer " + hsToken[:i%64]) }, p},
		{"token with more", func(i int) ([]byte, http.Header) { return body(i), auth("Bearer " + hsToken + "0") }, p},
		{"wrong scheme", func(i int) ([]byte, http.Header) {
			return body(i), auth([]string{"Basic ", "Token ", "MAC ", "Bearer  "}[i%4] + hsToken)
		}, p},
		{"token in another header", func(i int) ([]byte, http.Header) {
			return body(i), http.Header{"X-Access-Token": {hsToken}, "Proxy-Authorization": {"Bearer " + hsToken}}
		}, p},
		{"empty secret", func(i int) ([]byte, http.Header) { return body(i), auth("Bearer ") }, platform.Matrix.WithSecret("")},
	})
}

// FuzzMatrixVerify checks that Matrix's Verify accepts a transaction only
// with "Bearer" and the hs_token, whatever the body and header.
func FuzzMatrixVerify(f *testing.F) {
	f.Add(fixture(f, "matrix_txn.json"), "Bearer "+hsToken)
	f.Add([]byte(`{"events":[]}`), "Bearer "+asToken)
	f.Add([]byte(``), "Basic "+hsToken)
	f.Fuzz(func(t *testing.T, body []byte, auth string) {
		got, err := platform.Matrix.WithSecret(hsToken).Verify(body, http.Header{"Authorization": {auth}}, now)
		if err != nil {
			require.ErrorIs(t, err, platform.ErrUnauthenticated)
			return
		}
		scheme, token, _ := strings.Cut(auth, " ")
		require.True(t, strings.EqualFold(scheme, "Bearer"))
		require.Equal(t, hsToken, token, "accepted another token")
		require.Equal(t, body, got)
	})
}
