package main

import (
	"io"
	"net/url"
	"slices"
	"strings"
)

// redacted replaces a secret of a store URL wherever the command prints it.
const redacted = "xxxxx"

// harmless are the query parameters of a store URL whose values the command
// prints as they are: the store options of docs/urls.md, and client options
// that name no credential. Every other parameter's value is redacted, so
// that a secret the command does not know by name (pgx's sslpassword, a
// token, a key) is never printed: a new option is hidden until it is listed
// here. sslkey is not listed: it is the path of a private key, which tells
// where a secret lies; sslcert and sslrootcert are certificates, public.
var harmless = []string{
	// dedupe's options (docs/urls.md)
	"prefix", "addr", "table", "partitioned", "partition_span", "tz", "max_size",
	"layout", "compact", "shards", "schema",
	// go-redis
	"db", "protocol", "client_name", "dial_timeout", "read_timeout", "write_timeout",
	"pool_fifo", "pool_size", "pool_timeout", "min_idle_conns", "max_idle_conns",
	"max_active_conns", "conn_max_idle_time", "conn_max_lifetime", "max_retries",
	"min_retry_backoff", "max_retry_backoff", "skip_verify",
	// pgx and libpq
	"sslmode", "sslrootcert", "sslcert", "sslsni", "connect_timeout", "application_name",
	"search_path", "target_session_attrs", "pool_max_conns", "pool_min_conns",
	"pool_max_conn_lifetime", "pool_max_conn_idle_time", "pool_health_check_period",
	"pool_max_conn_lifetime_jitter", "statement_cache_capacity",
	"description_cache_capacity", "default_query_exec_mode",
}

// redactURL returns raw, a store URL, with every secret in it replaced by
// "xxxxx": the password of its user part and the value of every query
// parameter but the harmless ones (see [harmless]). It takes the URLs with
// an authority (redis://, postgres://, unix://) and those without
// (sqlite:PATH?…, memory:PATH?…); a text that is no URL is returned as it
// is, a URL that does not parse as "(unparsable URL)".
func redactURL(raw string) string {
	u, ok := parseStoreURL(raw)
	switch {
	case !ok:
		return raw
	case u == nil:
		return "(unparsable URL)"
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), redacted)
	}
	parts := strings.Split(u.RawQuery, "&")
	for i, part := range parts {
		if name, _, found := strings.Cut(part, "="); found && !isHarmless(name) {
			parts[i] = name + "=" + redacted
		}
	}
	u.RawQuery = strings.Join(parts, "&")
	return u.String()
}

// isHarmless reports whether the query parameter name, as written in a URL,
// is one of [harmless].
func isHarmless(name string) bool {
	n, err := url.QueryUnescape(name)
	return err == nil && slices.Contains(harmless, n)
}

// parseStoreURL parses raw as a URL: ok is false if it has no scheme (no
// URL at all), u is nil if it does not parse.
func parseStoreURL(raw string) (u *url.URL, ok bool) {
	scheme, _, found := strings.Cut(raw, ":")
	if !found || scheme == "" || strings.ContainsAny(scheme, " /?=@") {
		return nil, false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, true
	}
	return u, true
}

// urlSecrets returns the secrets of raw that [redactURL] hides, as they are
// written in raw and decoded: the password of its user part and the values
// of its parameters that are not harmless. A URL that does not parse gives
// its text after the scheme, so that none of it is printed.
func urlSecrets(raw string) []string {
	u, ok := parseStoreURL(raw)
	if !ok {
		return nil
	}
	if u == nil {
		_, rest, _ := strings.Cut(raw, ":")
		return []string{strings.TrimPrefix(rest, "//")}
	}
	var out []string
	if p, has := u.User.Password(); has {
		out = append(out, p, url.PathEscape(p), url.QueryEscape(p))
	}
	for _, part := range strings.Split(u.RawQuery, "&") {
		name, value, _ := strings.Cut(part, "=")
		if isHarmless(name) {
			continue
		}
		out = append(out, value)
		if v, err := url.QueryUnescape(value); err == nil {
			out = append(out, v)
		}
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// argSecrets returns the secrets of the store URLs in args (a URL argument,
// or a flag's value: -store URL, --from=URL) and in $DEDUPE_STORE.
func argSecrets(args []string, env string) []string {
	var out []string
	for _, a := range append(slices.Clone(args), env) {
		if strings.HasPrefix(a, "-") {
			_, a, _ = strings.Cut(a, "=")
		}
		out = append(out, urlSecrets(a)...)
	}
	// Longest first, so that a secret containing another is replaced whole.
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return slices.Compact(out)
}

// scrub returns s with each of secrets replaced by "xxxxx".
func scrub(s string, secrets []string) string {
	for _, sec := range secrets {
		s = strings.ReplaceAll(s, sec, redacted)
	}
	return s
}

// scrubWriter writes to w what is written to it with the secrets of the
// command line's store URLs replaced, whatever printed them (an error of a
// client library quoting its URL, a store's warning): the last guard behind
// [redactURL]. Each Write is scrubbed on its own; the command writes whole
// lines.
type scrubWriter struct {
	w       io.Writer
	secrets []string
}

// Write writes p to w scrubbed, and reports p's length written if it was.
func (s scrubWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(s.w, scrub(string(p), s.secrets)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// scrubbed returns w, or w behind a scrubWriter if there are secrets.
func scrubbed(w io.Writer, secrets []string) io.Writer {
	if len(secrets) == 0 {
		return w
	}
	return scrubWriter{w: w, secrets: secrets}
}
