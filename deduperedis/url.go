package deduperedis

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
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
// The query options prefix=, layout= and shards= set the store's
// configuration, overriding cfg's, and are not passed to the client: the
// grammar of the dedupe command's URLs, which docs/urls.md describes.
// prefix= sets [Config.Prefix] ("redis://host:6379/0?prefix=bot:");
// layout=plain or layout=compact sets [Config.Compact], and shards= a
// positive number [Config.Shards] ("?prefix=bot:&layout=compact&shards=4096",
// shards= only with layout=compact). Either of the two turns
// [Config.AdoptLayout] off: the URL names the layout, and the store is
// refused ([ErrLayoutMismatch]) if its prefix records another.
//
// For Sentinel or client options no URL can express, make the client and
// call [New].
func OpenURL(rawURL string, cfg Config) (*Store, error) {
	rawURL, err := takeOptions(rawURL, &cfg)
	if err != nil {
		return nil, err
	}
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
// As in [OpenURL], prefix=, layout= and shards= set [Config.Prefix],
// [Config.Compact] and [Config.Shards].
func OpenClusterURL(rawURL string, cfg Config) (*Store, error) {
	rawURL, err := takeOptions(rawURL, &cfg)
	if err != nil {
		return nil, err
	}
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

// takeOptions moves the query options prefix=, layout= and shards= of
// rawURL, if any, into cfg and returns the URL without them. A URL that does
// not parse is returned as it is, for go-redis to report.
func takeOptions(rawURL string, cfg *Config) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return rawURL, nil
	}
	q := u.Query()
	if !q.Has("prefix") && !q.Has("layout") && !q.Has("shards") {
		return rawURL, nil
	}
	if q.Has("prefix") {
		cfg.Prefix = q.Get("prefix")
	}
	switch v := q.Get("layout"); {
	case !q.Has("layout"):
		if q.Has("shards") {
			return "", errors.New("dedupe: redis: URL option shards= needs layout=compact")
		}
	case v == "plain" && !q.Has("shards"):
		cfg.Compact, cfg.AdoptLayout = false, false
	case v == "plain":
		return "", errors.New("dedupe: redis: URL option shards= needs layout=compact, not plain")
	case v == "compact":
		cfg.Compact, cfg.AdoptLayout = true, false
	default:
		return "", fmt.Errorf("dedupe: redis: URL option layout=%s: want plain or compact", v)
	}
	if v := q.Get("shards"); q.Has("shards") {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return "", fmt.Errorf("dedupe: redis: URL option shards=%s: want a positive number", v)
		}
		cfg.Shards = n
	}
	for _, k := range []string{"prefix", "layout", "shards"} {
		q.Del(k)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}
