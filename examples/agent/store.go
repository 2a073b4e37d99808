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

// Where the shared stores keep this program's keys, apart from any other
// application's on the same server.
const (
	redisPrefix   = "dedupe:examples-agent:"
	postgresTable = "examples_agent_dedupe"
)

// openStore opens the store that -store names; durable reports whether its
// keys survive a restart. A store on a server is checked at once.
func openStore(ctx context.Context, spec string) (st dedupe.Store, durable bool, err error) {
	switch {
	case spec == "memory":
		return dedupe.NewMemoryStore(dedupe.MemoryConfig{}), false, nil
	case strings.HasPrefix(spec, "sqlite:"):
		st, err := dedupe.OpenSQLite(strings.TrimPrefix(spec, "sqlite:"), dedupe.SQLiteConfig{})
		return st, true, err
	case strings.HasSuffix(spec, ".db") && !strings.Contains(spec, "://"):
		st, err := dedupe.OpenSQLite(spec, dedupe.SQLiteConfig{})
		return st, true, err
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"):
		rs, err := deduperedis.OpenURL(spec, deduperedis.Config{Prefix: redisPrefix})
		if err != nil {
			return nil, false, err
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if err := rs.Ping(pctx); err != nil {
			_ = rs.Close()
			return nil, false, fmt.Errorf("-store: redis: %w", err)
		}
		return rs, true, nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ps, err := postgres.Open(octx, spec, postgres.Config{Table: postgresTable})
		if err != nil {
			return nil, false, fmt.Errorf("-store: postgres: %w", err)
		}
		return ps, true, nil
	}
	return nil, false, fmt.Errorf("-store %q: want sqlite:PATH, PATH.db, memory, redis://HOST:PORT/DB or postgres://…", spec)
}
