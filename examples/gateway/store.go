package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/postgres"
	"github.com/gatewaykit/dedupe/redis"
)

// storeSpec is the store selected by the -store flag.
type storeSpec struct {
	kind   string // "memory", "sqlite", "redis" or "postgres"
	target string // the file path or the URL; "" for memory
}

// Where the shared stores keep this program's marks: a prefix and a table of
// its own, so that the example never reads or writes another application's
// keys on the same server.
const (
	redisPrefix   = "dedupe:examples-gateway:"
	postgresTable = "examples_gateway_dedupe"
)

// parseStore reads the value of -store: "memory", "sqlite:PATH", a path ending
// in ".db", a "redis://" or "rediss://" URL, or a "postgres://" or
// "postgresql://" URL.
func parseStore(s string) (storeSpec, error) {
	switch {
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
	return storeSpec{}, fmt.Errorf("-store %q: want memory, sqlite:PATH, PATH.db, redis://HOST:PORT/DB or postgres://…", s)
}

// durable reports whether the store's marks survive a restart of the gateway.
func (s storeSpec) durable() bool { return s.kind != "memory" }

// String returns the store for the report, without the password a URL may hold.
func (s storeSpec) String() string {
	switch s.kind {
	case "memory":
		return "memory"
	case "sqlite":
		return "sqlite:" + s.target
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
	case "redis":
		st, err := redis.OpenURL(s.target, redis.Config{Prefix: redisPrefix})
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
