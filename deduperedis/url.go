package deduperedis

import (
	"fmt"
	"net/url"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultClusterReload is the ClusterStateReloadInterval of the clients that
// [OpenURL] and [OpenClusterURL] make for Redis Cluster, instead of
// go-redis's 60 s: the longest a client goes on with a stale slot map when no
// call of the store fails (a failing call has the map reloaded at once).
const DefaultClusterReload = 5 * time.Second

// OpenURL returns a store on a client of its own, made from a URL such as
// "redis://127.0.0.1:6379/0", "rediss://user:password@host:6380/1" or
// "unix:///run/redis.sock?db=2" (the forms and query options of
// [redis.ParseURL]). A URL that names more nodes with addr= parameters, such
// as "redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002", is a
// Redis Cluster: see [OpenClusterURL]. The client honours context deadlines
// ([redis.Options.ContextTimeoutEnabled]). OpenURL does not contact the
// server; call [Store.Ping] to check it. The store owns the client and
// [Store.Close] closes it.
//
// The query option prefix= sets [Config.Prefix] ("redis://host:6379/0?prefix=bot:"),
// overriding cfg's, and is not passed to the client: the grammar of the
// dedupe command's URLs, which docs/urls.md describes.
//
// For Sentinel or client options no URL can express, make the client and
// call [New].
func OpenURL(rawURL string, cfg Config) (*Store, error) {
	rawURL = takePrefix(rawURL, &cfg)
	if u, err := url.Parse(rawURL); err == nil && u.Query().Has("addr") {
		return OpenClusterURL(rawURL, cfg)
	}
	opt, err := redis.ParseURL(rawURL)
	if err != nil {
		// The error does not repeat the URL, which may hold a password.
		return nil, fmt.Errorf("dedupe: redis: parse URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	return own(redis.NewClient(opt), cfg)
}

// OpenClusterURL returns a store on a [*redis.ClusterClient] of its own, made
// from a URL in the form of [redis.ParseClusterURL]: the first node in the
// URL's host, more with addr= parameters, and client options as query
// parameters ("redis://127.0.0.1:7000?addr=127.0.0.1:7001&dial_timeout=1s").
// One node is enough: the client learns the others from it. The client
// honours context deadlines ([redis.ClusterOptions.ContextTimeoutEnabled])
// and reloads its slot map every [DefaultClusterReload]. OpenClusterURL does
// not contact the cluster; call [Store.Ping] to check it. The store owns the
// client and [Store.Close] closes it.
//
// As in [OpenURL], prefix= sets [Config.Prefix].
func OpenClusterURL(rawURL string, cfg Config) (*Store, error) {
	rawURL = takePrefix(rawURL, &cfg)
	opt, err := redis.ParseClusterURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("dedupe: redis: parse cluster URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true
	opt.ClusterStateReloadInterval = DefaultClusterReload
	return own(redis.NewClusterClient(opt), cfg)
}

// own returns a store on client that closes client with it, or closes client
// and returns the error of New.
func own(client redis.UniversalClient, cfg Config) (*Store, error) {
	s, err := New(client, cfg)
	if err != nil {
		_ = client.Close()
		return nil, err
	}
	s.ownsClient = true
	return s, nil
}

// takePrefix moves the query option prefix= of rawURL, if any, into
// cfg.Prefix and returns the URL without it. A URL that does not parse is
// returned as it is, for go-redis to report.
func takePrefix(rawURL string, cfg *Config) string {
	u, err := url.Parse(rawURL)
	if err != nil || !u.Query().Has("prefix") {
		return rawURL
	}
	q := u.Query()
	cfg.Prefix = q.Get("prefix")
	q.Del("prefix")
	u.RawQuery = q.Encode()
	return u.String()
}
