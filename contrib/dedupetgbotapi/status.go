package dedupetgbotapi

import (
	"errors"
	"net/http"

	"github.com/gatewaykit/dedupe"
)

// StatusCode returns the HTTP status a webhook answers Telegram with, given
// what a [Handler]'s HandlerFunc returned: 200 for nil (processed, or a
// duplicate); 503 Service Unavailable for [dedupe.ErrInFlight], a copy whose
// first is still running after the wait, so that Telegram repeats it later
// and the repeat finds the outcome; and 500 for any other error, a failure
// whose retry Telegram then delivers. Telegram repeats every answer that is
// not 2xx; the two statuses tell a failure from a copy in flight in the logs.
func StatusCode(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, dedupe.ErrInFlight):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
