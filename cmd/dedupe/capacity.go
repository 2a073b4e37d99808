package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/gatewaykit/dedupe"
	"github.com/gatewaykit/dedupe/deduperedis"
	"github.com/gatewaykit/dedupe/migrate"
	"github.com/gatewaykit/dedupe/postgres"
)

// capacity is what "dedupe stats" says of a store's size (docs/sizing.md):
// the bytes the store takes, per mark, and how many more marks fit within a
// limit the store can tell.
type capacity struct {
	bytes     int64  // what the store takes
	of        string // what bytes counts
	limit     int64  // bytes it may take in all, or -1 if unknown
	limitOf   string // what limit is
	maxMarks  int64  // marks it may hold in all (memory: the URL's max_size), or -1
	advice    string // a line of advice on the store's settings, or ""
	perMarkOf int64  // marks and claims bytes is divided by
}

// measureCapacity reads the size of s, opened from the store URL raw, whose
// counts are st.
func measureCapacity(ctx context.Context, raw string, s dedupe.Store, st migrate.StoreStats) (capacity, error) {
	c := capacity{limit: -1, maxMarks: -1, perMarkOf: st.Marks + max(st.Claims, 0)}
	_, rest, _ := strings.Cut(raw, ":")
	path, q, _ := splitQuery(rest)
	switch v := s.(type) {
	case *deduperedis.Store:
		m, err := v.ServerMemory(ctx)
		if err != nil {
			return c, err
		}
		c.bytes, c.of = m.Used-m.Startup, "server memory since startup (used_memory - used_memory_startup)"
		if m.Max > 0 {
			c.limit, c.limitOf = m.Max-m.Startup, "maxmemory "+strconv.FormatInt(m.Max, 10)+", policy "+m.Policy
		}
		c.advice = redisAdvice(m)
	case *postgres.Store:
		for _, n := range st.Sizes { // the table's own total is the largest
			c.bytes = max(c.bytes, n)
		}
		c.of = "table, partitions and indexes"
		sb, err := v.SharedBuffers(ctx)
		if err != nil {
			return c, err
		}
		c.limit, c.limitOf = sb, "shared_buffers "+strconv.FormatInt(sb, 10)+": beyond it the table no longer stays in the server's cache"
	case *dedupe.SQLiteStore:
		c.bytes, c.of = st.Sizes["file"], "database file and WAL"
		if fi, err := os.Stat(path + "-wal"); err == nil {
			c.bytes += fi.Size()
		}
		if free, ok := freeDisk(path); ok {
			c.limit, c.limitOf = c.bytes+free, "free disk "+strconv.FormatInt(free, 10)
		}
	case *dedupe.MemoryStore:
		if fi, err := os.Stat(path); err == nil {
			c.bytes, c.of = fi.Size(), "snapshot file; the live store's heap is about 114 B a mark (docs/sizing.md)"
		}
		// The room is the gateway's MaxSize, which only the URL can tell.
		if n, err := strconv.ParseInt(q.Get("max_size"), 10, 64); err == nil && n > 0 {
			c.maxMarks = n
		}
	}
	return c, nil
}

// redisAdvice warns of a maxmemory policy that lets the server drop marks or
// claims before they expire, or of no limit at all.
func redisAdvice(m deduperedis.ServerMemory) string {
	switch {
	case m.Max == 0:
		return "no maxmemory: the server grows until the host runs out; set maxmemory and noeviction (docs/sizing.md)"
	case m.Policy == "noeviction":
		return ""
	case m.Policy == "volatile-ttl":
		return "volatile-ttl: at maxmemory the marks nearest their expiry are dropped early (docs/sizing.md)"
	default:
		return m.Policy + ": at maxmemory the server drops live marks and claims, and their messages run twice; use noeviction (docs/sizing.md)"
	}
}

// printCapacity prints the lines of c.
func printCapacity(w io.Writer, c capacity, marks int64) {
	if c.of == "" {
		return
	}
	if c.perMarkOf > 0 {
		perMark := float64(c.bytes) / float64(c.perMarkOf)
		fmt.Fprintf(w, "%-16s %.0f (%d bytes of %s / %d marks and claims)\n", "bytes/mark:", perMark, c.bytes, c.of, c.perMarkOf)
		if c.limit >= 0 {
			fmt.Fprintf(w, "%-16s %d more marks (%s)\n", "room:", max(int64(float64(c.limit-c.bytes)/perMark), 0), c.limitOf)
		}
	} else {
		fmt.Fprintf(w, "%-16s unknown: no marks (%d bytes of %s)\n", "bytes/mark:", c.bytes, c.of)
	}
	if c.maxMarks >= 0 {
		fmt.Fprintf(w, "%-16s %d more marks (max_size %d)\n", "room:", max(c.maxMarks-marks, 0), c.maxMarks)
	}
	if c.advice != "" {
		fmt.Fprintf(w, "%-16s %s\n", "note:", c.advice)
	}
}
