package canon

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"io"
	"slices"
	"strings"
)

// AppendXML parses s as XML and appends a canonical form in the alphabet of
// the JSON one: an element is "<" name attributes ">" content "/", a name is a
// string of "{namespace}local", attributes are name-value string pairs sorted
// by name, text is a string, trimmed, and text that is only whitespace,
// comments, processing instructions and directives are dropped. Entities are
// decoded, so "&amp;" and "&#38;" are equal. ok is false if s is not
// well-formed XML or nests deeper than [MaxDepth].
func AppendXML(buf []byte, s string) (_ []byte, ok bool) {
	d := xml.NewDecoder(strings.NewReader(s))
	d.Strict = true
	depth := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return buf, depth == 0
		}
		if err != nil {
			return buf, false
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth++; depth > MaxDepth {
				return buf, false
			}
			buf = appendStartElement(buf, t)
		case xml.EndElement:
			depth--
			buf = append(buf, '/')
		case xml.CharData:
			if text := bytes.TrimSpace(t); len(text) > 0 {
				buf = appendString(buf, string(text))
			}
		}
	}
}

func appendStartElement(buf []byte, t xml.StartElement) []byte {
	buf = append(buf, '<')
	buf = appendString(buf, xmlName(t.Name))
	attrs := slices.Clone(t.Attr)
	slices.SortFunc(attrs, func(a, b xml.Attr) int {
		return cmp.Or(cmp.Compare(a.Name.Space, b.Name.Space), cmp.Compare(a.Name.Local, b.Name.Local))
	})
	for _, a := range attrs {
		buf = appendString(buf, xmlName(a.Name))
		buf = appendString(buf, a.Value)
	}
	return append(buf, '>')
}

func xmlName(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	return "{" + n.Space + "}" + n.Local
}
