package platform

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Matrix is the preset for a Matrix application service: the transactions a
// homeserver PUTs to /_matrix/app/v1/transactions/{txnId}, each a batch of
// events, {"events": [ … ], "ephemeral": [ … ]} (Matrix specification,
// Application Service API, "Pushing events",
// https://spec.matrix.org/latest/application-service-api/#pushing-events).
// The preset keys each event with [Preset.Events]: the key is its event_id,
// which names one event across the whole federation, so an event that comes
// again in another transaction, or in a retried one, is one key. The txnId
// names only the batch and is in the path, which the preset does not see; it
// is not needed: a retried transaction holds the same events ("Homeservers
// MUST NOT alter (e.g. add more) events they were going to send within that
// transaction ID on retries"). Ephemeral data (m.typing, m.receipt,
// m.presence) has no event_id and is not keyed: a handler that wants it
// reads the body. An event without event_id makes the whole transaction
// [dedupe.ErrNoMessageID] rather than being left out.
//
// MessageID returns the event_id of a transaction with one event,
// [ErrNotAMessage] for one without events (ephemeral data only), so that it
// reaches the handler, and [dedupe.ErrNoMessageID] for one with several: key
// those with Events.
//
// TTL 24 h, the library's [dedupe.DefaultTTL]: the homeserver retries a
// transaction until it is answered 200 ("If the application service cannot
// be reached, the homeserver SHOULD backoff exponentially until the
// application service is reachable again"), with no end the spec names. A
// transaction that fails for longer than the TTL may run again the events
// of it that were processed before the failure; lengthen the TTL on a copy
// for a bridge that may be down for days.
//
// AckBudget 10 s: the spec sets no deadline for the answer; Synapse, the
// reference homeserver, gives up on a request after 60 seconds
// (synapse/http/client.py, SimpleHttpClient: timeout_deferred(…, 60, …))
// and retries the transaction, so a copy may wait a while for the first
// one's outcome.
//
// Secret: the hs_token of the application service's registration.
// "Homeservers MUST include an Authorization header, containing the hs_token
// … Application services MUST verify that the provided Bearer token matches
// their known hs_token, failing the request with an M_FORBIDDEN error if it
// does not match" (Application Service API, Authorization, changed in
// v1.4). [Preset.Verify] compares the token in constant time. Before v1.4 the
// token came in an access_token query parameter, which homeservers "should
// only send … if supporting legacy versions"; a request without the header
// is refused, whatever its query holds (Synapse sends the header always, and
// the parameter too only when use_appservice_legacy_authorization is set:
// synapse/appservice/api.py, push_bulk). Serve a homeserver that predates
// v1.4 behind a proxy that moves the parameter to the header. When both
// come, "Application services should ensure both match if both are
// provided" (same section): [Preset.VerifyRequest], which sees the query,
// refuses a request whose access_token is not the hs_token too, or comes
// more than once, or whose query is malformed; [Preset.Verify], which sees
// no query, cannot, so call VerifyRequest (package dedupehttp does). The
// token does not depend on the body, so only TLS keeps it from being
// replayed.
var Matrix = Preset{
	Name:        "matrix",
	TTL:         dedupe.DefaultTTL,
	AckBudget:   10 * time.Second,
	MessageID:   matrixMessageID,
	Events:      matrixEvents,
	newVerifier: newMatrixVerifier,
}

var (
	matrixFields      = [...]string{"events"}
	matrixEventFields = [...]string{"event_id"}
)

func matrixMessageID(body []byte, h http.Header) (string, error) {
	evs, err := matrixEvents(body, h)
	return onlyEvent("matrix", "transaction without events", evs, err)
}

func matrixEvents(body []byte, _ http.Header) ([]Event, error) {
	var v [len(matrixFields)][]byte
	if err := decodeBody("matrix", body, matrixFields[:], v[:]); err != nil {
		return nil, err
	}
	if v[0] == nil {
		return nil, fmt.Errorf("%w: matrix body has no events", dedupe.ErrNoMessageID)
	}
	evs := []Event{}
	err := elements("matrix", "events", v[0], func(e []byte) error {
		var f [len(matrixEventFields)][]byte
		err := element("matrix", "events[]", e, matrixEventFields[:], f[:])
		var id string
		if err == nil {
			id, err = parseID(f[0]).require("matrix event", "event_id")
		}
		evs = append(evs, keyEvent(e, id, err))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return evs, nil
}

type matrixVerifier struct{ token []byte }

func newMatrixVerifier(secret string) (verifier, error) { return matrixVerifier{[]byte(secret)}, nil }

// verifyQuery is verify for a request whose URL query is q: a legacy
// access_token beside the header must hold the hs_token too.
func (v matrixVerifier) verifyQuery(p *Preset, body []byte, h http.Header, q url.Values, now time.Time) ([]byte, error) {
	switch tokens := q["access_token"]; {
	case len(tokens) > 1:
		return nil, unauthenticated("matrix", "query parameter access_token appears more than once")
	case len(tokens) == 1 && subtle.ConstantTimeCompare([]byte(tokens[0]), v.token) != 1:
		return nil, unauthenticated("matrix", "access_token query parameter does not match the hs_token (the Authorization header must match it)")
	}
	return v.verify(p, body, h, now)
}

func (v matrixVerifier) verify(_ *Preset, body []byte, h http.Header, _ time.Time) ([]byte, error) {
	auth := h.Get("Authorization")
	if auth == "" {
		return nil, unauthenticated("matrix", "request has no Authorization header (the legacy access_token query parameter is not read)")
	}
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, unauthenticated("matrix", "Authorization is not Bearer")
	}
	if subtle.ConstantTimeCompare([]byte(token), v.token) != 1 {
		return nil, unauthenticated("matrix", "Bearer token does not match the hs_token")
	}
	return body, nil
}
