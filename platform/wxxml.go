package platform

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"

	"github.com/gatewaykit/dedupe"
)

// WeChat and WeCom deliver XML: <xml><ToUserName><![CDATA[…]]></ToUserName>
// <MsgId>…</MsgId>…</xml>. The presets read it with encoding/xml's strict
// tokenizer, not its struct decoding: an element the preset reads matches
// its name exactly (case-sensitive, no namespace), may appear once among the
// children of <xml>, and holds text only (CDATA included), never an element.
// Text is not trimmed: the ids are then checked for the characters the
// platform uses, so " 123" is refused rather than taken for "123".

// xmlFields finds in body, an <xml> document, the text of the children of
// its root named names: vals[i] and found[i] for names[i]. A body that is
// not such a document is an error wrapping [dedupe.ErrNoMessageID]; a name
// that appears twice is [dedupe.ErrInvalidKey].
func xmlFields(name string, body []byte, names []string, vals []string, found []bool) error {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	if err := xmlRoot(d); err != nil {
		return fmt.Errorf("%w: %s body is not the expected XML: %w", dedupe.ErrNoMessageID, name, err)
	}
	for {
		tok, err := d.Token()
		if err != nil {
			return fmt.Errorf("%w: %s body is not the expected XML: %w", dedupe.ErrNoMessageID, name, err)
		}
		switch t := tok.(type) {
		case xml.EndElement: // </xml>
			return xmlEnd(name, d)
		case xml.StartElement:
			i := xmlName(t.Name, names)
			if i < 0 {
				if err := d.Skip(); err != nil {
					return fmt.Errorf("%w: %s body is not the expected XML: %w", dedupe.ErrNoMessageID, name, err)
				}
				continue
			}
			if found[i] {
				return fmt.Errorf("%w: %s element %s appears twice", dedupe.ErrInvalidKey, name, names[i])
			}
			if vals[i], err = xmlText(d); err != nil {
				return fmt.Errorf("%w: %s element %s: %w", dedupe.ErrNoMessageID, name, names[i], err)
			}
			found[i] = true
		}
	}
}

// errNotXML reports a document that is not one <xml> element.
var errNotXML = errors.New("root element is not <xml>")

// xmlRoot reads d up to its root element, which must be <xml>: a prolog of
// an XML declaration, comments and white space may come before it, a DOCTYPE
// may not.
func xmlRoot(d *xml.Decoder) error {
	for {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Space != "" || t.Name.Local != "xml" {
				return errNotXML
			}
			return nil
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return errNotXML
			}
		case xml.Directive:
			return errors.New("DOCTYPE and other directives are not accepted")
		}
	}
}

// xmlEnd checks that nothing but white space and comments follows the root.
func xmlEnd(name string, d *xml.Decoder) error {
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %s body is not the expected XML: %w", dedupe.ErrNoMessageID, name, err)
		}
		switch t := tok.(type) {
		case xml.Comment:
		case xml.CharData:
			if len(bytes.TrimSpace(t)) != 0 {
				return fmt.Errorf("%w: %s body has text after </xml>", dedupe.ErrNoMessageID, name)
			}
		default:
			return fmt.Errorf("%w: %s body has more than one root element", dedupe.ErrNoMessageID, name)
		}
	}
}

// xmlName returns the index of n in names, or -1.
func xmlName(n xml.Name, names []string) int {
	if n.Space != "" {
		return -1
	}
	for i, s := range names {
		if n.Local == s {
			return i
		}
	}
	return -1
}

// xmlText reads the text of an element whose start d has just read, to its
// end: character data and CDATA sections, comments skipped, no element.
func xmlText(d *xml.Decoder) (string, error) {
	var text []byte
	for {
		tok, err := d.Token()
		if err != nil {
			return "", err
		}
		switch t := tok.(type) {
		case xml.CharData:
			text = append(text, t...)
		case xml.EndElement:
			return string(text), nil
		case xml.StartElement:
			return "", errors.New("holds an element, not text")
		}
	}
}
