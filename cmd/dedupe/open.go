package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/postgres"
)

// store is an open store and what closing it takes.
type store struct {
	dedupe.Store
	close func() error
}

// memoryMaxSize is the default max_size of a memory: URL: far more marks than
// a snapshot holds, since the memory store grows only as marks arrive.
const memoryMaxSize = 1 << 26

// role is what a command does with a store.
type role int

const (
	source  role = iota // read: the file must exist
	dest                // written: a missing file is created
	dryDest             // read, as a destination: a missing file is empty
	edit                // written, as forget does: the file must exist
)

// writes reports whether a store opened for r is written to.
func (r role) writes() bool { return r == dest || r == edit }

// openStore is openStoreLog with the stores' warnings discarded.
func openStore(ctx context.Context, raw string, r role) (*store, error) {
	return openStoreLog(ctx, raw, r, io.Discard)
}

// openStoreLog opens the store that raw names, for r, with the stores'
// warnings written to warn. A store only read (a source, or the destination
// of a dry run) is opened read-only: nothing is created or changed in it,
// and a table that does not exist is an error. A memory snapshot that is
// only read is opened from a copy of the file, so that closing it never
// rewrites the original. A SQLite file written to is opened as the store
// opens it, which puts it in WAL mode and adds the claims table if missing,
// as a gateway sharing the file would.
func openStoreLog(ctx context.Context, raw string, r role, warn io.Writer) (*store, error) {
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok {
		return nil, fmt.Errorf("%w: store URL %q has no scheme", errUsage, raw)
	}
	switch scheme {
	case "sqlite":
		return openSQLite(rest, r, warn)
	case "memory":
		return openMemory(rest, r)
	case "redis", "rediss", "unix":
		return openRedis(ctx, raw)
	case "postgres", "postgresql":
		return openPostgres(ctx, raw, r)
	}
	return nil, fmt.Errorf("%w: store URL scheme %q: want sqlite, memory, redis, rediss, unix, postgres", errUsage, scheme)
}

// splitQuery splits "path?query" and parses the query.
func splitQuery(s string) (string, url.Values, error) {
	path, query, _ := strings.Cut(s, "?")
	v, err := url.ParseQuery(query)
	if err != nil {
		return "", nil, fmt.Errorf("%w: query of %q: %v", errUsage, s, err)
	}
	return path, v, nil
}

func openSQLite(rest string, r role, warn io.Writer) (*store, error) {
	path, q, err := splitQuery(rest)
	if err != nil {
		return nil, err
	}
	cfg := dedupe.SQLiteConfig{Table: q.Get("table"), ReadOnly: !r.writes(), Logger: warnLogger(warn)}
	if tz := q.Get("tz"); tz != "" {
		if cfg.Location, err = time.LoadLocation(tz); err != nil {
			return nil, fmt.Errorf("%w: tz=%s: %v", errUsage, tz, err)
		}
	}
	if _, err := os.Stat(path); err != nil && r != dest {
		return nil, fmt.Errorf("sqlite file %s: %w", path, err)
	}
	s, err := dedupe.OpenSQLite(path, cfg)
	if err != nil {
		return nil, err
	}
	return &store{s, s.Close}, nil
}

func openMemory(rest string, r role) (*store, error) {
	path, q, err := splitQuery(rest)
	if err != nil {
		return nil, err
	}
	cfg := dedupe.MemoryConfig{MaxSize: memoryMaxSize, SnapshotInterval: 24 * time.Hour}
	if n := q.Get("max_size"); n != "" {
		if cfg.MaxSize, err = strconv.Atoi(n); err != nil || cfg.MaxSize <= 0 {
			return nil, fmt.Errorf("%w: max_size=%s: want a positive number", errUsage, n)
		}
	}
	cleanup := func() error { return nil }
	if _, err := os.Stat(path); err != nil && (r == source || r == edit) {
		return nil, fmt.Errorf("snapshot %s: %w", path, err)
	}
	if !r.writes() {
		dir, err := os.MkdirTemp("", "dedupe-snapshot-")
		if err != nil {
			return nil, err
		}
		cleanup = func() error { return os.RemoveAll(dir) }
		tmp := filepath.Join(dir, "snapshot")
		if err := copyFile(path, tmp); err != nil {
			_ = cleanup()
			return nil, err
		}
		path = tmp
	}
	cfg.SnapshotPath = path
	s, err := dedupe.OpenMemoryStore(cfg)
	if err != nil {
		if s != nil {
			_ = s.Close()
		}
		_ = cleanup()
		return nil, err
	}
	return &store{s, func() error {
		err := s.Close()
		if cerr := cleanup(); err == nil {
			err = cerr
		}
		return err
	}}, nil
}

// warnLogger returns a logger of the stores' warnings to w, one line each
// without a time stamp.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{
		Level: slog.LevelWarn,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

// copyFile copies the file at from to to; a missing file copies as none.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// openRedis opens a Redis store by its URL, as the library does, in the
// layout its prefix records (plain, or compact with its shards) unless the
// URL names one (layout=, shards=), which must then agree with the record.
// Nothing is created, so a store only read is opened as one written: a
// store that adopts the recorded layout writes no record, and one whose URL
// names its layout records it only on a prefix without a record, as a
// gateway of that layout would.
func openRedis(ctx context.Context, raw string) (*store, error) {
	s, err := deduperedis.OpenURL(raw, deduperedis.Config{AdoptLayout: true})
	if err != nil {
		return nil, err
	}
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	return &store{s, s.Close}, nil
}

// openPostgres opens a PostgreSQL store by its URL, as the library does, in
// the layout of an existing table unless the URL names one, and read-only
// unless r writes.
func openPostgres(ctx context.Context, raw string, r role) (*store, error) {
	s, err := postgres.Open(ctx, raw, postgres.Config{AdoptLayout: true, ReadOnly: !r.writes()})
	if err != nil {
		return nil, err
	}
	return &store{s, s.Close}, nil
}
