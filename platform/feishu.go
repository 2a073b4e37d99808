package platform

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gatewaykit/dedupe"
)

// Feishu is the preset for Feishu/Lark event subscriptions (request URL mode,
// schema 2.0). For im.message.receive_v1 the key is the message's id,
// event.message.message_id ("om_…"), not header.event_id: Feishu may push the
// same message more than once under different event ids, and the message id is
// what stays (in the 1.0 schema, a "message" event's event.open_message_id,
// not its uuid). Other event types carry no message of their own (a reaction or a
// recall names the message it is about, and must not be taken for a copy of
// it), so for them the key is header.event_id (uuid in the 1.0 schema), a best
// effort that catches retries of one push.
//
// TTL 12 h: when the request URL does not answer with HTTP 200 within 3
// seconds, Feishu pushes the event again after 15 s, 5 min, 1 h and 6 h (Feishu
// Open Platform, event subscription, "retry"), about 7 h 5 min in all. Twelve
// hours cover that with margin and are half the memory of the 24 h default.
//
// A url_verification challenge returns [ErrNotAMessage]. A body encrypted with
// the app's Encrypt Key ({"encrypt": "…"}) must be decrypted before Extract;
// as it stands it returns an error wrapping [dedupe.ErrNoMessageID].
var Feishu = Preset{
	Name:      "feishu",
	TTL:       12 * time.Hour,
	MessageID: feishuMessageID,
}

type feishuEvent struct {
	Schema  string `json:"schema"`
	Type    string `json:"type"`
	UUID    jsonID `json:"uuid"`
	Encrypt string `json:"encrypt"`
	Header  struct {
		EventID   jsonID `json:"event_id"`
		EventType string `json:"event_type"`
	} `json:"header"`
	Event struct {
		Type          string `json:"type"`            // 1.0 schema
		OpenMessageID jsonID `json:"open_message_id"` // 1.0 schema
		Message       struct {
			MessageID jsonID `json:"message_id"`
		} `json:"message"`
	} `json:"event"`
}

func feishuMessageID(body []byte, _ http.Header) (string, error) {
	var e feishuEvent
	if err := decodeBody("feishu", body, &e); err != nil {
		return "", err
	}
	switch {
	case e.Type == "url_verification":
		return "", fmt.Errorf("%w: feishu url_verification", ErrNotAMessage)
	case e.Encrypt != "":
		return "", fmt.Errorf("%w: feishu body is encrypted: decrypt it with the app's Encrypt Key first", dedupe.ErrNoMessageID)
	case e.Header.EventType == "im.message.receive_v1":
		return e.Event.Message.MessageID.require("feishu im.message.receive_v1", "event.message.message_id")
	case e.Schema == "" && e.Event.Type == "message":
		return e.Event.OpenMessageID.require("feishu 1.0 message event", "event.open_message_id")
	case e.Schema == "":
		return e.UUID.require("feishu 1.0 event", "uuid")
	}
	return e.Header.EventID.require("feishu event", "header.event_id")
}
