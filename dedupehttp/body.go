package dedupehttp

import (
	"bytes"
	"io"
	"net/http"
)

// Body returns the whole body of r. For a request seen by an [Extractor] or a
// handler behind [New], [Middleware] or [Async], it returns the buffered body
// without copying or reading it, whatever was read from r.Body already; the
// caller must not modify the slice. Behind [New] or [WithVerify] it is the
// body the preset authenticated: for an encrypted Feishu delivery, the
// plaintext. For any other request, it reads r.Body to the end and replaces
// it with a reader over the bytes, so that the body can be read again.
func Body(r *http.Request) ([]byte, error) {
	if b, ok := r.Body.(*body); ok {
		return b.data, nil
	}
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	data, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body = newBody(data)
	return data, nil
}

// body is a buffered request body. Body recognises it.
type body struct {
	bytes.Reader
	data []byte
}

func newBody(data []byte) *body {
	b := &body{data: data}
	b.Reset(data)
	return b
}

// set makes b read data from its start.
func (b *body) set(data []byte) {
	b.data = data
	b.Reset(data)
}

// Close does nothing: the original body was read to its end, and the server
// closes it.
func (*body) Close() error { return nil }

// readBody reads r's body, up to c.maxBody bytes.
func (c *config) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	if r.ContentLength > c.maxBody {
		w.Header().Set("Connection", "close") // do not read the rest
		return nil, &http.MaxBytesError{Limit: c.maxBody}
	}
	rd := http.MaxBytesReader(w, r.Body, c.maxBody)
	size := 512
	if r.ContentLength >= 0 {
		size = int(r.ContentLength) + 1 // room to read io.EOF without growing
	}
	buf := make([]byte, 0, size)
	for {
		n, err := rd.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}
