package platform

import (
	"fmt"
	"net/url"

	"github.com/gatewaykit/dedupe"
)

// Slack posts interactivity payloads and slash commands as
// application/x-www-form-urlencoded bodies, not as the Events API's JSON:
// an interaction is one member, payload, holding its JSON ("Handling user
// interaction", https://api.slack.com/interactivity/handling), and a slash
// command is a form of its own fields, command, text, response_url,
// trigger_id and others ("Enabling interactivity with Slash commands",
// https://api.slack.com/interactivity/slash-commands). Both carry a
// trigger_id, "a temporary ID generated for the interaction", which is the
// key. Bolt apps receive events, interactions and commands at one Request
// URL, so the Slack preset reads all three.

// slackPayloadFields are the members the preset reads of an interaction
// payload.
var slackPayloadFields = [...]string{"type", "trigger_id"}

// slackFormID finds the key of a form-encoded Slack delivery. form is false
// for a body that is not one (JSON, or a form with neither payload nor
// command), which is then read as the Events API's JSON.
func slackFormID(body []byte) (id string, form bool, err error) {
	if len(body) == 0 || startsObject(body) {
		return "", false, nil
	}
	vals, perr := url.ParseQuery(string(body))
	if perr != nil {
		return "", false, nil
	}
	switch {
	case has(vals, "payload"):
		id, err = slackInteractionID(vals)
	case has(vals, "command"):
		id, err = slackCommandID(vals)
	case vals.Get("ssl_check") == "1":
		// Slack checks a slash command's certificate with a form of
		// ssl_check=1 and a token, to be answered 200 (bolt-python's
		// SslCheck middleware answers it so).
		err = fmt.Errorf("%w: slack ssl_check", ErrNotAMessage)
	default:
		return "", false, nil
	}
	return id, true, err
}

// slackInteractionID returns the trigger_id of the interaction payload in
// vals. An options request (block_suggestion), which Slack sends as a user
// types in a select menu of external data and which needs an answer and no
// deduplication, is [ErrNotAMessage]; a payload without a trigger_id, such
// as view_closed, is [dedupe.ErrNoMessageID].
func slackInteractionID(vals url.Values) (string, error) {
	payload, err := single(vals, "payload")
	if err != nil {
		return "", err
	}
	var v [len(slackPayloadFields)][]byte
	if err := decodeBody("slack", []byte(payload), slackPayloadFields[:], v[:]); err != nil {
		return "", err
	}
	typ, err := stringField("slack", "payload.type", v[0])
	if err != nil {
		return "", err
	}
	if typ == "block_suggestion" {
		return "", fmt.Errorf("%w: slack %s", ErrNotAMessage, typ)
	}
	return parseID(v[1]).require("slack "+typ+" interaction", "trigger_id")
}

// slackCommandID returns the trigger_id of the slash command in vals.
func slackCommandID(vals url.Values) (string, error) {
	if _, err := single(vals, "command"); err != nil {
		return "", err
	}
	id, err := single(vals, "trigger_id")
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("%w: slack slash command has no trigger_id", dedupe.ErrNoMessageID)
	}
	return id, nil
}

// has reports whether the form vals has the field name.
func has(vals url.Values, name string) bool {
	_, ok := vals[name]
	return ok
}

// single returns the value of the field name of vals, "" if it is absent. A
// field given twice is [dedupe.ErrInvalidKey]: which copy counts would be a
// guess.
func single(vals url.Values, name string) (string, error) {
	switch v := vals[name]; len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	}
	return "", fmt.Errorf("%w: slack form field %q appears twice", dedupe.ErrInvalidKey, name)
}
