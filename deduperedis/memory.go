package deduperedis

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
)

// ServerMemory is the memory of the Redis server (every master's, summed, on
// a cluster) from the memory section of INFO
// (https://redis.io/docs/latest/commands/info/). It is the server's, not
// the store's alone: other data in any database of the server counts too.
type ServerMemory struct {
	Used    int64  // used_memory: bytes allocated by the server
	Startup int64  // used_memory_startup: bytes the server used once started, before any key
	Max     int64  // maxmemory: the limit, 0 for none
	Policy  string // maxmemory_policy: what the server does at the limit, such as "noeviction"
}

// ServerMemory reads the memory section of INFO from the store's server, or
// from each master of a cluster and sums them (the policy is the first
// master's). docs/sizing.md says how to read it.
func (s *Store) ServerMemory(ctx context.Context) (ServerMemory, error) {
	if s.closed.Load() {
		return ServerMemory{}, dedupe.ErrClosed
	}
	var (
		mu  sync.Mutex
		sum ServerMemory
	)
	add := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "memory").Result()
		if err != nil {
			return err
		}
		m, err := parseMemory(info)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		sum.Used += m.Used
		sum.Startup += m.Startup
		sum.Max += m.Max
		if sum.Policy == "" {
			sum.Policy = m.Policy
		}
		return nil
	}
	var err error
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, add)
	case *redis.Client:
		err = add(ctx, c)
	default:
		err = fmt.Errorf("a %T client", s.client)
	}
	if err != nil {
		return ServerMemory{}, fmt.Errorf("dedupe: redis: server memory: %w", err)
	}
	return sum, nil
}

// parseMemory reads the fields of ServerMemory from the text of INFO memory.
func parseMemory(info string) (ServerMemory, error) {
	var m ServerMemory
	fields := map[string]*int64{"used_memory": &m.Used, "used_memory_startup": &m.Startup, "maxmemory": &m.Max}
	found := 0
	for line := range strings.Lines(info) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		if name == "maxmemory_policy" {
			m.Policy = value
			continue
		}
		if p := fields[name]; p != nil {
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				return m, fmt.Errorf("INFO memory: %s:%s: %w", name, value, err)
			}
			*p = n
			found++
		}
	}
	if found != len(fields) {
		return m, fmt.Errorf("INFO memory: want used_memory, used_memory_startup and maxmemory, got %q", info)
	}
	return m, nil
}
