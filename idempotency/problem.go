package idempotency

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultDocs is the default documentation of problem types ([WithDocs]):
// this package's, whose overview lists them under "Problems".
const DefaultDocs = "https://pkg.go.dev/github.com/gatewaykit/dedupe/idempotency"

// HeaderReplayed is the header a replayed response carries, with the value
// "true": Stripe's name, which its clients and several other APIs (Whop,
// ullun) already read. The draft names none. The first response does not
// carry it.
const HeaderReplayed = "Idempotent-Replayed"

// kind is a kind of problem the middleware answers with.
type kind struct {
	name   string // the type URI's fragment
	status int
	title  string
}

// The problems of the draft's section 2.7, and the middleware's own.
var (
	keyMissing     = kind{"key-missing", http.StatusBadRequest, "Idempotency-Key is missing"}
	keyMalformed   = kind{"key-malformed", http.StatusBadRequest, "Idempotency-Key is malformed"}
	keyInFlight    = kind{"key-in-flight", http.StatusConflict, "A request is outstanding for this Idempotency-Key"}
	keyReused      = kind{"key-reused", http.StatusUnprocessableEntity, "Idempotency-Key is already used"}
	notReplayable  = kind{"not-replayable", http.StatusConflict, "The response for this Idempotency-Key cannot be replayed"}
	bodyTooLarge   = kind{"body-too-large", http.StatusRequestEntityTooLarge, "Request body is too large"}
	bodyUnreadable = kind{"body-unreadable", http.StatusBadRequest, "Request body could not be read"}
	unavailable    = kind{"unavailable", http.StatusServiceUnavailable, "Idempotency keys are unavailable"}
	overQuota      = kind{"over-quota", http.StatusServiceUnavailable, "Too many Idempotency-Keys are held"}
)

// problem is an RFC 9457 problem details object.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// problem answers with a problem of kind k: application/problem+json, in
// English, linking to the documentation as the draft's section 2.7 shows.
// A store that failed is retried after a second.
func (c *config) problem(w http.ResponseWriter, k kind, detail string) {
	var after time.Duration
	if k == unavailable {
		after = time.Second
	}
	c.retryProblem(w, k, detail, after)
}

// retryProblem is problem with Retry-After: after in whole seconds, rounded
// up and at least 1, unless after is 0.
func (c *config) retryProblem(w http.ResponseWriter, k kind, detail string, after time.Duration) {
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Language", "en")
	h.Set("Link", "<"+c.docs+`>; rel="describedby"`)
	if after != 0 {
		h.Set("Retry-After", strconv.FormatInt(max(int64((after+time.Second-1)/time.Second), 1), 10))
	}
	w.WriteHeader(k.status)
	b, _ := json.Marshal(problem{Type: c.docs + "#" + k.name, Title: k.title, Status: k.status, Detail: detail})
	_, _ = w.Write(append(b, '\n'))
}

// Details of the problems.
const (
	detailRequired    = "This operation is idempotent and requires an Idempotency-Key header, a quoted string such as \"8e03978e-40d5-43e8-bc93-6894a57f9324\"."
	detailInFlight    = "A request with the same Idempotency-Key for the same operation is being processed. Retry it in a moment."
	detailUnavailable = "The store of idempotency keys failed. Retry later."
)

// detailMalformed is the detail of a field refused with err. A bare key
// (Stripe's form, refused without WithBareKeys) is told how to send it: quoted.
func detailMalformed(field string, err error) string {
	if bare, berr := parseBareKey(field); berr == nil {
		return "Malformed Idempotency-Key: a bare token, not a quoted string. The key must be a String of RFC 9651 " +
			"(draft-ietf-httpapi-idempotency-key-header, section 2.1): send it quoted, as Idempotency-Key: \"" + bare + "\". " +
			"(The server can accept unquoted keys too, with idempotency.WithBareKeys.)"
	}
	reason := strings.TrimPrefix(err.Error(), ErrMalformedKey.Error()+": ")
	return "Malformed Idempotency-Key: " + reason + ". " + detailRequired
}

// detailInterrupted is the detail of a key held by a request that may have
// been interrupted.
func (c *config) detailInterrupted(lease time.Duration) string {
	return fmt.Sprintf("A request with the same Idempotency-Key for the same operation is being processed, or was interrupted. "+
		"An interrupted request holds its key for up to %s after it stopped; a retry after that runs it again. "+
		"Retry after the seconds of Retry-After.", span(lease))
}

func (c *config) detailOverQuota() string {
	return "Too many Idempotency-Keys are held, by this caller or by all: a request with a new key is not accepted until one expires. " +
		"Retries with keys already used are answered. Retry after the seconds of Retry-After. " + c.expiry()
}

func (c *config) detailReused() string {
	return "This operation is idempotent and requires correct usage of Idempotency Key. Idempotency Key MUST not be reused across different payloads of this operation. " + c.expiry()
}

func (c *config) detailNotReplayable() string {
	return "The request with this Idempotency-Key was processed, but its response is too large to keep, or is gone from the store. It will not be processed again. " + c.expiry()
}

// expiry states the expiration policy of the draft's section 2.3.
func (c *config) expiry() string {
	return fmt.Sprintf("A key expires %s after its request was processed.", span(c.ttl))
}

// span writes d in whole hours, minutes or seconds when it is one.
func span(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	case d%time.Second == 0:
		return plural(int64(d/time.Second), "second")
	}
	return d.String()
}

func plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return fmt.Sprintf("%d %ss", n, unit)
}
