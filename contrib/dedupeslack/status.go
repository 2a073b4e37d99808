package dedupeslack

import (
	"errors"
	"net/http"

	"github.com/gatewaykit/dedupe"
)

// StatusCode returns the HTTP status an Events API endpoint answers Slack
// with, given what an [EventsAPI] handler returned: 200 for nil (processed,
// or a duplicate); 503 Service Unavailable for [dedupe.ErrInFlight], a retry
// whose first delivery is still running after the wait, so that Slack sends
// it again later and that copy finds the outcome; and 500 for any other
// error, a failure whose retry Slack then delivers. Slack retries every
// answer that is not 2xx (three times, the last about 6 minutes after the
// first delivery); the two statuses tell a failure from a copy in flight in
// the logs.
func StatusCode(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, dedupe.ErrInFlight):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
