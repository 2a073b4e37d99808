package dedupehttp

import (
	"encoding/binary"
	"errors"
	"net/http"

	"github.com/gatewaykit/dedupe"
)

// answerRecorder passes a handler's answer on to the client and records it:
// the status the run records, the Content-Type and the named headers as they
// were when the status was sent, and the body up to dedupe.MaxResultSize.
type answerRecorder struct {
	http.ResponseWriter
	names  []string // headers kept besides Content-Type
	header http.Header
	sent   bool // the header was recorded
	body   []byte
	over   bool // the body outgrew the limit
}

// snap records the headers kept, once, as the status is sent.
func (a *answerRecorder) snap() {
	if a.sent {
		return
	}
	a.sent = true
	a.keep("Content-Type")
	for _, name := range a.names {
		a.keep(name)
	}
}

// keep records the values of the header name, if it is set.
func (a *answerRecorder) keep(name string) {
	v, ok := a.ResponseWriter.Header()[name]
	if !ok {
		return
	}
	if a.header == nil {
		a.header = make(http.Header, 1+len(a.names))
	}
	a.header[name] = append([]string(nil), v...)
}

// WriteHeader records the headers with the first final status.
func (a *answerRecorder) WriteHeader(code int) {
	if code >= 200 || code == http.StatusSwitchingProtocols {
		a.snap()
	}
	a.ResponseWriter.WriteHeader(code)
}

// Write records p, up to the limit, and passes it on.
func (a *answerRecorder) Write(p []byte) (int, error) {
	a.snap()
	if !a.over {
		if len(a.body)+len(p) > dedupe.MaxResultSize {
			a.over, a.body = true, nil
		} else {
			a.body = append(a.body, p...)
		}
	}
	return a.ResponseWriter.Write(p)
}

// Flush records the headers, which a flush sends, and flushes.
func (a *answerRecorder) Flush() {
	a.snap()
	_ = http.NewResponseController(a.ResponseWriter).Flush()
}

// Unwrap returns the underlying ResponseWriter, for [http.ResponseController].
func (a *answerRecorder) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// answer returns the recorded answer with status, encoded to be kept: nil
// for an empty 200 without a named header, and ok false for one larger than
// dedupe.MaxResultSize encoded.
func (a *answerRecorder) answer(status int) (ans []byte, ok bool) {
	a.snap() // a handler that wrote nothing is answered with the header as it is
	if a.over {
		return nil, false
	}
	_, typed := a.header["Content-Type"]
	if status == http.StatusOK && len(a.body) == 0 && (len(a.header) == 0 || len(a.header) == 1 && typed) {
		return nil, true
	}
	ans = encodeAnswer(status, a.header, a.body)
	return ans, len(ans) <= dedupe.MaxResultSize
}

// answerVersion is the first byte of an encoded answer.
const answerVersion = 1

// encodeAnswer encodes an answer as version, status, the number of header
// values, each as name and value, and the body, with uvarint lengths.
func encodeAnswer(status int, header http.Header, body []byte) []byte {
	b := make([]byte, 0, 16+len(body))
	b = append(b, answerVersion)
	b = binary.AppendUvarint(b, uint64(status))
	n := 0
	for _, v := range header {
		n += len(v)
	}
	b = binary.AppendUvarint(b, uint64(n))
	for name, vals := range header {
		for _, v := range vals {
			b = appendString(b, name)
			b = appendString(b, v)
		}
	}
	return append(b, body...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

var errAnswer = errors.New("dedupe: dedupehttp: kept answer is malformed")

// decodeAnswer decodes what encodeAnswer encoded.
func decodeAnswer(b []byte) (status int, header http.Header, body []byte, err error) {
	if len(b) == 0 || b[0] != answerVersion {
		return 0, nil, nil, errAnswer
	}
	b = b[1:]
	s, n := binary.Uvarint(b)
	if n <= 0 || s < 200 || s > 999 {
		return 0, nil, nil, errAnswer
	}
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return 0, nil, nil, errAnswer
	}
	b = b[n:]
	header = make(http.Header, count)
	for range count {
		var name, v string
		if name, b, err = readString(b); err != nil {
			return 0, nil, nil, err
		}
		if v, b, err = readString(b); err != nil {
			return 0, nil, nil, err
		}
		header[name] = append(header[name], v)
	}
	return int(s), header, b, nil
}

func readString(b []byte) (string, []byte, error) {
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return "", nil, errAnswer
	}
	b = b[n:]
	return string(b[:l]), b[l:], nil
}
