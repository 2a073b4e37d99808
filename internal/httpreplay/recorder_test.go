package httpreplay

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRecorderPassesThrough: the client gets everything the handler wrote,
// headers the recording does not keep included, and the recording holds the
// status, the listed headers and the whole body.
func TestRecorderPassesThrough(t *testing.T) {
	w := httptest.NewRecorder()
	rec := NewRecorder(w, Config{})
	rec.Header().Set("Content-Type", "application/json")
	rec.Header().Set("Set-Cookie", "session=secret")
	rec.Header().Set("X-Request-Id", "r1")
	rec.Header().Set("Location", "/v1/things/1")
	rec.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(rec, `{"id":`)
	_, _ = io.WriteString(rec, `1}`)

	assert.Equal(t, http.StatusCreated, w.Code)
	assert.Equal(t, `{"id":1}`, w.Body.String())
	assert.Equal(t, "session=secret", w.Header().Get("Set-Cookie"))
	assert.Equal(t, "r1", w.Header().Get("X-Request-Id"))

	resp, ok := rec.Response()
	require.True(t, ok)
	assert.Equal(t, http.StatusCreated, resp.Status)
	assert.Equal(t, http.Header{"Content-Type": {"application/json"}, "Location": {"/v1/things/1"}}, resp.Header)
	assert.Equal(t, `{"id":1}`, string(resp.Body))
	assert.Equal(t, http.StatusCreated, rec.Status())
}

// TestRecorderImplicitStatus: a Write without WriteHeader is a 200, and so is
// a handler that wrote nothing; the first final status wins, informational
// ones are passed on unrecorded.
func TestRecorderImplicitStatus(t *testing.T) {
	t.Run("write", func(t *testing.T) {
		rec := NewRecorder(httptest.NewRecorder(), Config{})
		_, _ = rec.Write([]byte("hi"))
		rec.WriteHeader(http.StatusTeapot) // superfluous: net/http ignores it
		resp, ok := rec.Response()
		require.True(t, ok)
		assert.Equal(t, http.StatusOK, resp.Status)
	})
	t.Run("nothing", func(t *testing.T) {
		w := httptest.NewRecorder()
		rec := NewRecorder(w, Config{})
		assert.Equal(t, 0, rec.Status())
		rec.Header().Set("Content-Type", "text/plain")
		resp, ok := rec.Response()
		require.True(t, ok)
		assert.Equal(t, Response{Status: http.StatusOK, Header: http.Header{"Content-Type": {"text/plain"}}}, resp)
	})
	t.Run("informational", func(t *testing.T) {
		rec := NewRecorder(httptest.NewRecorder(), Config{})
		rec.WriteHeader(http.StatusEarlyHints)
		assert.Equal(t, 0, rec.Status())
		rec.WriteHeader(http.StatusAccepted)
		assert.Equal(t, http.StatusAccepted, rec.Status())
	})
}

// TestRecorderHeaderSnapshot: headers are recorded as they were sent with
// the status; a change after it reaches no client and no recording. Values
// are recorded as net/http sends them.
func TestRecorderHeaderSnapshot(t *testing.T) {
	rec := NewRecorder(httptest.NewRecorder(), Config{Headers: []string{"x-a", "X-B", "content-type"}})
	rec.Header().Set("X-A", " one\r\ntwo ")
	rec.Header()["X-B"] = []string{"1", "2"}
	rec.WriteHeader(http.StatusOK)
	rec.Header().Set("X-A", "changed")
	rec.Header().Set("Content-Type", "late")
	resp, ok := rec.Response()
	require.True(t, ok)
	assert.Equal(t, http.Header{"X-A": {"one  two"}, "X-B": {"1", "2"}}, resp.Header)
}

// TestRecorderNeverKeeps: Set-Cookie, Date and Content-Length are not kept
// even when the caller lists them.
func TestRecorderNeverKeeps(t *testing.T) {
	rec := NewRecorder(httptest.NewRecorder(), Config{Headers: []string{"Set-Cookie", "date", "Content-Length", "Connection", "X-Ok"}})
	for _, h := range []string{"Set-Cookie", "Date", "Content-Length", "Connection", "X-Ok"} {
		rec.Header().Set(h, "v")
	}
	resp, ok := rec.Response()
	require.True(t, ok)
	assert.Equal(t, http.Header{"X-Ok": {"v"}}, resp.Header)
}

// TestRecorderLimit: a response that encodes to the limit is replayable, one
// byte more is not, and the client gets all of it either way.
func TestRecorderLimit(t *testing.T) {
	const limit = 1000
	head := headSize(http.StatusOK, http.Header{})
	fits := limit - head - uvarintLen(limit)
	for _, n := range []int{fits, fits + 1, 5 * limit} {
		w := httptest.NewRecorder()
		rec := NewRecorder(w, Config{Headers: []string{}, Limit: limit})
		body := bytes.Repeat([]byte("x"), n)
		_, _ = rec.Write(body[:n/2])
		_, _ = rec.Write(body[n/2:])
		assert.Equal(t, n, w.Body.Len())
		_, ok := rec.Response()
		b, err := rec.Encode()
		if n == fits {
			require.True(t, ok)
			require.NoError(t, err)
			assert.Len(t, b, limit)
			continue
		}
		assert.False(t, ok, n)
		assert.ErrorIs(t, err, ErrTooLarge)
		assert.Contains(t, err.Error(), "over 1000")
	}
}

// TestRecorderLimitDefault: without a limit, or with one above it, the limit
// is MaxSize.
func TestRecorderLimitDefault(t *testing.T) {
	for _, limit := range []int{0, -1, 2 * MaxSize} {
		rec := NewRecorder(httptest.NewRecorder(), Config{Limit: limit})
		_, _ = rec.Write(make([]byte, MaxSize))
		_, err := rec.Encode()
		assert.ErrorIs(t, err, ErrTooLarge)
	}
}

// plainWriter is a ResponseWriter that cannot flush.
type plainWriter struct{ http.ResponseWriter }

// TestRecorderFlush: flushing through http.ResponseController or
// http.Flusher reaches the wrapped writer, and is reported unsupported when
// it cannot flush; it sends the status.
func TestRecorderFlush(t *testing.T) {
	w := httptest.NewRecorder()
	rec := NewRecorder(w, Config{})
	require.NoError(t, http.NewResponseController(rec).Flush())
	assert.True(t, w.Flushed)
	assert.Equal(t, http.StatusOK, rec.Status())

	w = httptest.NewRecorder()
	var f http.Flusher = NewRecorder(w, Config{})
	f.Flush()
	assert.True(t, w.Flushed)

	rec = NewRecorder(plainWriter{httptest.NewRecorder()}, Config{})
	assert.ErrorIs(t, http.NewResponseController(rec).Flush(), http.ErrNotSupported)
}

// TestRecorderReplayByteForByte: over a real server, a replayed response is the
// recorded one byte for byte, Date aside: the whole dump for a body sent in
// one piece, and status, headers and body for one the first answer sent
// chunked (the replay has a Content-Length). Set-Cookie is not replayed.
func TestRecorderReplayByteForByte(t *testing.T) {
	for _, n := range []int{10, 3000} {
		text := strings.Repeat("é", n)
		var stored []byte
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if stored != nil {
				resp, err := Decode(stored)
				assert.NoError(t, err)
				assert.NoError(t, resp.Replay(w))
				return
			}
			rec := NewRecorder(w, Config{})
			rec.Header().Set("Content-Type", "application/json")
			rec.Header().Set("Location", "/v1/x/7")
			rec.Header().Set("Set-Cookie", "s=1")
			rec.Header().Add("Vary", "Accept")
			rec.Header().Add("Vary", "Accept-Language")
			rec.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(rec, `{"id":7,"text":"`+text+`"}`)
			b, err := rec.Encode()
			assert.NoError(t, err)
			stored = b
		}))
		get := func() (*http.Response, []byte, string) {
			resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("q"))
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			resp.Header.Del("Date")
			resp.Body = io.NopCloser(bytes.NewReader(body))
			dump, err := httputil.DumpResponse(resp, true)
			require.NoError(t, err)
			return resp, body, string(dump)
		}
		first, firstBody, firstDump := get()
		second, secondBody, secondDump := get()
		srv.Close()
		require.NotNil(t, stored)
		assert.Equal(t, "s=1", first.Header.Get("Set-Cookie"))
		assert.Empty(t, second.Header.Get("Set-Cookie"))
		first.Header.Del("Set-Cookie")
		assert.Equal(t, first.Status, second.Status)
		assert.True(t, bytes.Equal(firstBody, secondBody), "bodies differ")
		assert.Equal(t, strconv.Itoa(len(firstBody)), second.Header.Get("Content-Length"))
		if n == 10 {
			assert.Equal(t, strings.Replace(firstDump, "Set-Cookie: s=1\r\n", "", 1), secondDump)
			continue
		}
		assert.Equal(t, []string{"chunked"}, first.TransferEncoding)
		second.Header.Del("Content-Length")
		assert.Equal(t, first.Header, second.Header)
	}
}

// TestReplayNoBody: a 204 is replayed without a Content-Length; an empty
// 200 with Content-Length 0.
func TestReplayNoBody(t *testing.T) {
	w := httptest.NewRecorder()
	require.NoError(t, Response{Status: http.StatusNoContent}.Replay(w))
	assert.Equal(t, http.StatusNoContent, w.Code)
	assert.Empty(t, w.Header().Get("Content-Length"))

	w = httptest.NewRecorder()
	require.NoError(t, Response{Status: http.StatusOK}.Replay(w))
	assert.Equal(t, "0", w.Header().Get("Content-Length"))
}

// failingWriter refuses every body write.
type failingWriter struct{ *httptest.ResponseRecorder }

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("gone") }

// TestRecorderKeepsWhatWasWritten: the recording holds the bytes the wrapped
// writer took, not those it refused.
func TestRecorderKeepsWhatWasWritten(t *testing.T) {
	rec := NewRecorder(failingWriter{httptest.NewRecorder()}, Config{})
	_, err := rec.Write([]byte("lost"))
	require.Error(t, err)
	resp, ok := rec.Response()
	require.True(t, ok)
	assert.Empty(t, resp.Body)
}
