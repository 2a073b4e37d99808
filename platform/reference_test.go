package platform_test

import (
	"encoding/json"
	"strings"
)

// reference finds the id of body for the preset named name, as the preset
// documents it, with encoding/json's map decoding (see FuzzPresetExactKeys).
// It returns refUnknown where it cannot judge: a body that is not an object,
// a member of the wrong kind, a repaired string, a key twice.
func reference(name string, body []byte) (string, int) {
	top, ok := refObject(body)
	if !ok {
		return "", refUnknown
	}
	str := func(m map[string]json.RawMessage, k string) (string, bool) { return refString(m[k]) }
	switch name {
	case "telegram":
		return refIDOf(top["update_id"])
	case "slack":
		typ, ok := str(top, "type")
		if !ok || typ == "url_verification" || typ == "app_rate_limited" {
			return "", refUnknown
		}
		return refIDOf(top["event_id"])
	case "discord":
		if string(top["type"]) == "1" {
			return "", refUnknown
		}
		return refIDOf(top["id"])
	case "qq":
		if op, ok := top["op"]; ok && string(op) != "null" && string(op) != "0" {
			return "", refUnknown
		}
		return refIDOf(top["id"])
	case "onebot":
		return refOneBot(top)
	case "feishu":
		return refFeishu(top)
	case "stripe":
		return refIDOf(top["id"])
	}
	return "", refUnknown
}

func refOneBot(top map[string]json.RawMessage) (string, int) {
	pt, ok := refString(top["post_type"])
	if !ok || (pt != "message" && pt != "message_sent") {
		return "", refUnknown
	}
	self, c := refIDOf(top["self_id"])
	if c != refID {
		return "", c
	}
	if strings.TrimLeft(strings.TrimPrefix(self, "-"), "0123456789") != "" || strings.Trim(self, "-") == "" {
		return "", refInvalid
	}
	id, c := refIDOf(top["message_id"])
	if c != refID {
		return "", c
	}
	return self + ":" + id, refID
}

func refFeishu(top map[string]json.RawMessage) (string, int) {
	sub := func(m map[string]json.RawMessage, k string) (map[string]json.RawMessage, bool) {
		raw, present := m[k]
		if !present || string(raw) == "null" {
			return map[string]json.RawMessage{}, true
		}
		return refObject(raw)
	}
	hdr, ok1 := sub(top, "header")
	ev, ok2 := sub(top, "event")
	var msg map[string]json.RawMessage
	ok3 := false
	if ok2 {
		msg, ok3 = sub(ev, "message")
	}
	schema, ok4 := refString(top["schema"])
	typ, ok5 := refString(top["type"])
	enc, ok6 := refString(top["encrypt"])
	et, ok7 := refString(hdr["event_type"])
	evType, ok8 := refString(ev["type"])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6 && ok7 && ok8) || typ == "url_verification" || enc != "" {
		return "", refUnknown
	}
	switch {
	case et == "im.message.receive_v1":
		return refIDOf(msg["message_id"])
	case schema == "" && evType == "message":
		return refIDOf(ev["open_message_id"])
	case schema == "":
		return refIDOf(top["uuid"])
	}
	return refIDOf(hdr["event_id"])
}
