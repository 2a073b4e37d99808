package platform

import (
	"fmt"
	"net/http"
	"time"
)

// Slack is the preset for the Slack Events API. The key is the envelope's
// event_id, "a unique identifier for this specific event, globally unique
// across all workspaces", which a retry repeats. Retries carry the headers
// X-Slack-Retry-Num (1, 2, 3) and X-Slack-Retry-Reason (such as
// "http_timeout"); the key does not depend on them, so a retry is found to be
// a copy of its first delivery.
//
// TTL 1 h: Slack retries a delivery that got no 2xx within 3 seconds three
// times, "nearly immediately", "after 1 minute" and "after 5 minutes" (Events
// API, "Retries"), so the last copy comes about 6 minutes after the first. A
// TTL never under 10 minutes is needed; an hour leaves room for delays on
// either side at little cost.
//
// A url_verification challenge or an app_rate_limited notice returns
// [ErrNotAMessage].
var Slack = Preset{
	Name:      "slack",
	TTL:       time.Hour,
	MessageID: slackMessageID,
}

type slackEnvelope struct {
	Type    string `json:"type"`
	EventID jsonID `json:"event_id"`
}

func slackMessageID(body []byte, _ http.Header) (string, error) {
	var e slackEnvelope
	if err := decodeBody("slack", body, &e); err != nil {
		return "", err
	}
	switch e.Type {
	case "url_verification", "app_rate_limited":
		return "", fmt.Errorf("%w: slack %s", ErrNotAMessage, e.Type)
	}
	return e.EventID.require("slack event", "event_id")
}
