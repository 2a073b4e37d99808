// Package httpreplay records an HTTP response as it passes to the client and
// encodes it, so that a later copy of the request can be answered with the
// same status, headers and body: the replay of dedupehttp's webhook edge and
// of package idempotency, kept with a key's mark by Deduper.DoResult.
//
// A [Recorder] wraps the handler's [http.ResponseWriter]: everything goes on
// to the client at once, and the recorder keeps the final status, the headers
// of its [Config] list as they were when the status was sent, and the body up
// to the size limit. [Encode] turns a [Response] into at most
// [MaxSize] bytes, [Decode] turns them back, and
// [Response.Replay] writes the response again.
package httpreplay

import (
	"net/http"
	"net/textproto"
	"slices"
	"strings"
)

// DefaultHeaders are the headers a [Recorder] keeps when its [Config] names
// none: those that describe the body or the created resource, and no header
// of the connection, the session or the moment.
var DefaultHeaders = []string{
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Disposition",
	"Location", "Cache-Control", "ETag", "Last-Modified", "Vary",
}

// never are the headers no recording keeps, whatever the caller lists: a
// cookie set for one client must not be handed to another request, Date and
// the framing headers are the server's for the reply being sent.
var never = []string{
	"Set-Cookie", "Set-Cookie2", "Date", "Content-Length", "Transfer-Encoding",
	"Connection", "Keep-Alive", "Proxy-Connection", "Trailer", "Upgrade", "Te",
}

// Forbidden reports whether name is a header no recording keeps or replays:
// Set-Cookie, Date, Content-Length (replay sets it anew) and the headers of
// the connection.
func Forbidden(name string) bool {
	return slices.Contains(never, http.CanonicalHeaderKey(name))
}

// Config says what a [Recorder] keeps. Its zero value keeps [DefaultHeaders]
// within [MaxSize].
type Config struct {
	// Headers lists the response headers kept, in the order they are
	// encoded (default: DefaultHeaders). Names are case-insensitive; the
	// [Forbidden] ones are skipped.
	Headers []string

	// Limit is the largest encoded response, in bytes (default, and at
	// most, MaxSize). A larger one is not replayable.
	Limit int
}

func (c Config) limit() int {
	if c.Limit <= 0 || c.Limit > MaxSize {
		return MaxSize
	}
	return c.Limit
}

func (c Config) headers() []string {
	if c.Headers == nil {
		return DefaultHeaders
	}
	return c.Headers
}

// Recorder is an [http.ResponseWriter] that passes everything on to the one it
// wraps and records the response. It unwraps for [http.ResponseController]
// and flushes if the wrapped writer can. A handler that hijacks the
// connection leaves a recording of what it wrote before, which replays
// nothing useful: do not record such handlers. Like any ResponseWriter it is
// for one handler's goroutine.
type Recorder struct {
	w      http.ResponseWriter
	cfg    Config
	status int         // the final status sent, 0 before
	header http.Header // the kept headers, as they were sent with status
	body   []byte
	size   int  // encoded size of status and header
	total  int  // bytes of body written, kept or not
	over   bool // the response outgrew the limit; body is dropped
}

// NewRecorder returns a Recorder passing on to w and keeping what cfg says.
func NewRecorder(w http.ResponseWriter, cfg Config) *Recorder {
	return &Recorder{w: w, cfg: cfg}
}

// Header returns the wrapped writer's header map.
func (r *Recorder) Header() http.Header { return r.w.Header() }

// WriteHeader passes code on and, for the first final status (200 and up,
// or 101), records it with the kept headers.
func (r *Recorder) WriteHeader(code int) {
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.sent(code)
	}
	r.w.WriteHeader(code)
}

// Write passes p on, as status 200 if no status was sent, and records the
// bytes the wrapped writer took.
func (r *Recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.sent(http.StatusOK)
	}
	n, err := r.w.Write(p)
	r.keep(p[:n])
	return n, err
}

// Flush is FlushError without its error, for handlers that assert
// [http.Flusher].
func (r *Recorder) Flush() { _ = r.FlushError() }

// FlushError sends buffered data to the client, as status 200 if no status
// was sent, and returns [http.ErrNotSupported] if the wrapped writer cannot
// flush.
func (r *Recorder) FlushError() error {
	if r.status == 0 {
		r.sent(http.StatusOK)
	}
	return http.NewResponseController(r.w).Flush()
}

// Unwrap returns the wrapped ResponseWriter, for [http.ResponseController].
func (r *Recorder) Unwrap() http.ResponseWriter { return r.w }

// Status returns the final status sent, or 0 if the handler has sent none
// yet.
func (r *Recorder) Status() int { return r.status }

// Response returns the recorded response; ok is false if it is larger than
// the limit, and so not replayable. A handler that sent nothing is recorded
// as net/http answers for it: status 200, the headers as they are now, no
// body.
func (r *Recorder) Response() (resp Response, ok bool) {
	if r.status == 0 {
		r.sent(http.StatusOK)
	}
	if r.over {
		return Response{}, false
	}
	return Response{Status: r.status, Header: r.header, Body: r.body}, true
}

// Encode returns the recorded response encoded (see [Encode]), or an error
// wrapping [ErrTooLarge] if it is larger than the limit.
func (r *Recorder) Encode() ([]byte, error) {
	resp, ok := r.Response()
	if !ok {
		return nil, tooLarge(r.size+bodySize(r.total), r.cfg.limit())
	}
	return encode(resp, r.cfg.limit())
}

// sent records status code with the kept headers as they are now, which is
// what the wrapped writer sends with it.
func (r *Recorder) sent(code int) {
	r.status = code
	src := r.w.Header()
	r.header = make(http.Header)
	for _, name := range r.cfg.headers() {
		name = http.CanonicalHeaderKey(name)
		if vs, ok := src[name]; ok && !Forbidden(name) && r.header[name] == nil {
			r.header[name] = sentValues(vs)
		}
	}
	r.size = headSize(code, r.header)
	r.checkSize(0)
}

// sentValues returns vs as net/http sends them: each CR and LF a space,
// and the result trimmed.
func sentValues(vs []string) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = textproto.TrimString(newlines.Replace(v))
	}
	return out
}

var newlines = strings.NewReplacer("\n", " ", "\r", " ") // as net/http's Header.Write

// keep records p, written after the recorded body, within the limit.
func (r *Recorder) keep(p []byte) {
	r.total += len(p)
	if r.over || len(p) == 0 {
		return
	}
	r.checkSize(len(p))
	if !r.over {
		r.body = append(r.body, p...)
	}
}

// checkSize marks the response too large if n more bytes of body would make
// it so, and drops the body.
func (r *Recorder) checkSize(n int) {
	if r.size+bodySize(len(r.body)+n) > r.cfg.limit() {
		r.over, r.body = true, nil
	}
}
