package deduperedis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/gatewaykit/dedupe"
)

// The optional interfaces of package migrate. Marks are walked with SCAN
// over the store's prefix, in the server's order (not key order): the cursor
// is SCAN's, which a walk resumes from, with SCAN's guarantee that every key
// present from the start to the end of the walk is yielded, some maybe twice.
// On Redis Cluster the walk scans each master in turn, in the order of the
// lowest slot each serves, and its cursor names the master by that slot.
// Expiries cross as the remaining TTL (PTTL, PEXPIRE), taken from or added to
// the local clock, so that a mark keeps its remaining TTL whatever the
// clocks say.

// scanned is what a page of the walk found under one key.
type scanned struct {
	key     string
	value   string
	expires time.Time // local clock; zero: no expiry
}

// ListMarks calls yield with the marks SCAN finds after cursor ("" for the
// first page), at least limit keys scanned unless the walk ends, each with
// its expiry on the local clock (the zero time for a key without one), and
// returns the cursor of the next page ("" after the last). Claims and
// released keys are left out. A key is the text after the store's prefix,
// split at its first ':'. It implements [dedupe.Lister]. On the compact
// layout ([Config.Compact]) it fails with an error wrapping
// [errors.ErrUnsupported]: a fingerprint does not give its key back, so the
// marks of a compact store cannot be copied to another store.
func (s *Store) ListMarks(ctx context.Context, cursor string, limit int, yield func(key dedupe.Key, expires time.Time)) (string, error) {
	if s.closed.Load() {
		return "", dedupe.ErrClosed
	}
	if err := s.layoutChecked(ctx); err != nil {
		return "", fmt.Errorf("dedupe: redis: list marks: %w", err)
	}
	if s.compact {
		return "", fmt.Errorf("dedupe: redis: list marks: %w on the compact layout, which keeps a fingerprint of each key, not the key", errors.ErrUnsupported)
	}
	next, found, err := s.scanPage(ctx, cursor, max(limit, 1))
	if err != nil {
		return "", fmt.Errorf("dedupe: redis: list marks: %w", err)
	}
	for _, f := range found {
		if _, marked := parseMark(f.value); !marked {
			continue
		}
		ch, id, _ := strings.Cut(strings.TrimPrefix(f.key, s.prefix), ":")
		yield(dedupe.Key{Channel: ch, MessageID: id}, f.expires)
	}
	return next, nil
}

// scanPage scans from cursor until it has found limit keys of the prefix or
// the walk ends, and reads each key's value and remaining TTL.
func (s *Store) scanPage(ctx context.Context, cursor string, limit int) (string, []scanned, error) {
	node, scan, err := s.position(ctx, cursor)
	if err != nil {
		return "", nil, err
	}
	var found []scanned
	for len(found) < limit {
		if node.client == nil {
			return "", found, nil
		}
		keys, next, err := node.client.Scan(ctx, scan, escapeGlob(s.prefix)+"*", int64(limit)).Result()
		if err != nil {
			return "", nil, err
		}
		if found, err = readKeys(ctx, node.client, keys, found); err != nil {
			return "", nil, err
		}
		if scan = next; scan == 0 {
			if node = nextMaster(node); node.client == nil {
				return "", found, nil
			}
		}
	}
	return node.cursor(scan), found, nil
}

// readKeys appends the value and expiry of each of keys, read in one
// pipeline, to found: the remaining TTL added to the local time halfway
// through the round trip. Keys gone meanwhile are left out.
func readKeys(ctx context.Context, client redis.Cmdable, keys []string, found []scanned) ([]scanned, error) {
	if len(keys) == 0 {
		return found, nil
	}
	gets := make([]*redis.StringCmd, len(keys))
	ttls := make([]*redis.DurationCmd, len(keys))
	sent := time.Now()
	_, err := client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			gets[i], ttls[i] = p.Get(ctx, k), p.PTTL(ctx, k)
		}
		return nil
	})
	local := sent.Add(time.Since(sent) / 2)
	if err != nil && !errors.Is(err, redis.Nil) {
		return found, err
	}
	for i, k := range keys {
		v, err := gets[i].Result()
		if err == redis.Nil {
			continue
		}
		ttl := ttls[i].Val()
		if err != nil || ttl == -2 { // gone between the two
			continue
		}
		var exp time.Time
		if ttl >= 0 {
			exp = local.Add(ttl)
		}
		found = append(found, scanned{key: k, value: v, expires: exp})
	}
	return found, nil
}

// escapeGlob escapes the characters SCAN's MATCH pattern gives a meaning.
func escapeGlob(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}

// walkNode is the server a walk scans: the client, or on a cluster one
// master, known by the lowest slot it serves.
type walkNode struct {
	client  redis.Cmdable // nil after the last master
	slot    int           // -1 without a cluster
	masters []clusterMaster
}

// cursor returns the walk's cursor at scan on n.
func (n walkNode) cursor(scan uint64) string {
	if n.slot < 0 {
		return strconv.FormatUint(scan, 10)
	}
	return strconv.Itoa(n.slot) + "/" + strconv.FormatUint(scan, 10)
}

// clusterMaster is a master of a cluster and the lowest slot it serves.
type clusterMaster struct {
	slot   int
	client *redis.Client
}

// position returns the node and the SCAN cursor that cursor names.
func (s *Store) position(ctx context.Context, cursor string) (walkNode, uint64, error) {
	slotText, scanText, inCluster := strings.Cut(cursor, "/")
	if !inCluster {
		scanText = slotText
	}
	var scan uint64
	if scanText != "" {
		var err error
		if scan, err = strconv.ParseUint(scanText, 10, 64); err != nil {
			return walkNode{}, 0, fmt.Errorf("bad cursor %q", cursor)
		}
	}
	if s.cluster == nil {
		if inCluster {
			return walkNode{}, 0, fmt.Errorf("cursor %q is a cluster's", cursor)
		}
		return walkNode{client: s.client, slot: -1}, scan, nil
	}
	masters, err := s.masters(ctx)
	if err != nil {
		return walkNode{}, 0, err
	}
	slot := 0
	if inCluster {
		if slot, err = strconv.Atoi(slotText); err != nil {
			return walkNode{}, 0, fmt.Errorf("bad cursor %q", cursor)
		}
	} else if cursor != "" {
		return walkNode{}, 0, fmt.Errorf("cursor %q is not a cluster's", cursor)
	}
	i := slices.IndexFunc(masters, func(m clusterMaster) bool { return m.slot >= slot })
	switch {
	case i < 0:
		return walkNode{masters: masters}, 0, nil
	case masters[i].slot != slot:
		// The master the walk was on serves other slots now: scan the next from the start.
		scan = 0
	}
	return walkNode{client: masters[i].client, slot: masters[i].slot, masters: masters}, scan, nil
}

// nextMaster returns the master after n on a cluster, or a node without a
// client at the end of the walk.
func nextMaster(n walkNode) walkNode {
	if n.slot < 0 {
		return walkNode{}
	}
	i := slices.IndexFunc(n.masters, func(m clusterMaster) bool { return m.slot > n.slot })
	if i < 0 {
		return walkNode{}
	}
	return walkNode{client: n.masters[i].client, slot: n.masters[i].slot, masters: n.masters}
}

// masters returns the cluster's masters ordered by the lowest slot each
// serves.
func (s *Store) masters(ctx context.Context) ([]clusterMaster, error) {
	slots, err := s.cluster.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, err
	}
	lowest := map[string]int{}
	for _, r := range slots {
		if len(r.Nodes) == 0 {
			continue
		}
		addr := r.Nodes[0].Addr
		if cur, ok := lowest[addr]; !ok || r.Start < cur {
			lowest[addr] = r.Start
		}
	}
	var mu sync.Mutex
	var masters []clusterMaster
	err = s.cluster.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		slot, ok := lowest[c.Options().Addr]
		if ok {
			mu.Lock()
			masters = append(masters, clusterMaster{slot: slot, client: c})
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(masters) != len(lowest) {
		return nil, errors.New("the cluster's masters and its slot map disagree; try again")
	}
	slices.SortFunc(masters, func(a, b clusterMaster) int { return a.slot - b.slot })
	return masters, nil
}
