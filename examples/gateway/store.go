package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/postgres"
)

// storeSpec is the store selected by the -store flag.
type storeSpec struct {
	kind   string // "memory", "sqlite", "redis", "postgres" or "layered"
	target string // the file path or the URL; "" for memory; the back store's spec for layered
}

// transportWindow is how long the front layer of a layered store remembers a
// processed update: two or three times the interval of the platform's first
// retries, as the ClawBridge design's transport layer does. The back store
// keeps the mark for telegramTTL.
const transportWindow = 5 * time.Minute

// Where the shared stores keep this program's marks: a prefix and a table of
// its own, so that the example never reads or writes another application's
// keys on the same server.
const (
	redisPrefix   = "dedupe:examples-gateway:"
	postgresTable = "examples_gateway_dedupe"
)

// parseStore reads the value of -store: "memory", "sqlite:PATH", a path ending
// in ".db", a "redis://" or "rediss://" URL (a Redis Cluster if it names
// more nodes with addr=, see deduperedis.OpenURL), a "postgres://" or
// "postgresql://" URL, or "layered:" and one of the others but memory.
func parseStore(s string) (storeSpec, error) {
	switch {
	case strings.HasPrefix(s, "layered:"):
		back, err := parseStore(strings.TrimPrefix(s, "layered:"))
		if err != nil || back.kind == "memory" || back.kind == "layered" {
			return storeSpec{}, fmt.Errorf("-store %q: want layered:sqlite:PATH, layered:redis://… or layered:postgres://…", s)
		}
		return storeSpec{kind: "layered", target: strings.TrimPrefix(s, "layered:")}, nil
	case s == "" || s == "memory":
		return storeSpec{kind: "memory"}, nil
	case strings.HasPrefix(s, "sqlite:"):
		path := strings.TrimPrefix(s, "sqlite:")
		if path == "" {
			return storeSpec{}, fmt.Errorf("-store %q: want sqlite:PATH", s)
		}
		return storeSpec{kind: "sqlite", target: path}, nil
	case strings.HasSuffix(s, ".db") && !strings.Contains(s, "://"):
		return storeSpec{kind: "sqlite", target: s}, nil
	case strings.HasPrefix(s, "redis://"), strings.HasPrefix(s, "rediss://"):
		return storeSpec{kind: "redis", target: s}, nil
	case strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		return storeSpec{kind: "postgres", target: s}, nil
	}
	return storeSpec{}, fmt.Errorf("-store %q: want memory, sqlite:PATH, PATH.db, redis://HOST:PORT/DB, postgres://… or layered:…", s)
}

// back returns the back store of a layered store, and s itself otherwise.
func (s storeSpec) back() storeSpec {
	if s.kind != "layered" {
		return s
	}
	b, _ := parseStore(s.target)
	return b
}

// durable reports whether the store's marks survive a restart of the gateway.
func (s storeSpec) durable() bool { return s.kind != "memory" }

// onServer reports whether the store (the back one, if layered) is reached
// over the network, where -fault can put faults.
func (s storeSpec) onServer() bool {
	k := s.back().kind
	return k == "redis" || k == "postgres"
}

// flag returns the value of -store that selects s.
func (s storeSpec) flag() string {
	switch s.kind {
	case "memory":
		return "memory"
	case "sqlite", "layered":
		return s.kind + ":" + s.target
	}
	return s.target
}

// String returns the store for the report, without the password a URL may hold.
func (s storeSpec) String() string {
	switch s.kind {
	case "memory":
		return "memory"
	case "sqlite":
		return "sqlite:" + s.target
	case "layered":
		return "layered:" + s.back().String()
	}
	return redactURL(s.target)
}

// redactURL hides the password of a URL, if it has one.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	userinfo, host, ok := strings.Cut(rest, "@")
	if !ok {
		return u
	}
	if user, _, ok := strings.Cut(userinfo, ":"); ok {
		return scheme + "://" + user + ":xxxxx@" + host
	}
	return u
}

// openStore opens the store s selects. Stores on a server are checked at once,
// so that a server that is not running is reported before any delivery.
func openStore(ctx context.Context, s storeSpec) (dedupe.Store, error) {
	switch s.kind {
	case "memory":
		return dedupe.NewMemoryStore(dedupe.MemoryConfig{}), nil
	case "sqlite":
		return dedupe.OpenSQLite(s.target, dedupe.SQLiteConfig{})
	case "layered":
		back, err := openStore(ctx, s.back())
		if err != nil {
			return nil, err
		}
		front := dedupe.NewMemoryStore(dedupe.MemoryConfig{TTL: transportWindow})
		return dedupe.NewLayered(front, back)
	case "redis":
		st, err := deduperedis.OpenURL(s.target, deduperedis.Config{Prefix: redisPrefix})
		if err != nil {
			return nil, err
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := st.Ping(pctx); err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("-store %s: %w", redactURL(s.target), err)
		}
		return st, nil
	case "postgres":
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		st, err := postgres.Open(octx, s.target, postgres.Config{Table: postgresTable})
		if err != nil {
			return nil, fmt.Errorf("-store %s: %w", redactURL(s.target), err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("unknown store kind %q", s.kind)
}
