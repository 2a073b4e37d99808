package deduperedis

import (
	"context"
	"fmt"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
)

// Forget drops key's mark and the result kept with it unless a live claim
// holds key; see [dedupe.Forgetter]. It is one script call (forgetScript)
// that reads the key's value and deletes it only if it is a mark, in one
// atomic step on the server, so a claim is never deleted; it touches one
// key, so it works on Redis Cluster, where it is retried after a failover
// as the store's other calls are. On the compact layout it is one script on
// the key's claim key and bucket (compactForgetScript), which share a slot. With [Config.Replicas], a mark deleted is
// reported only once the replicas confirmed the deletion. A Forget retried
// after a lost reply finds the mark gone and reports false.
func (s *Store) Forget(ctx context.Context, key dedupe.Key) (bool, error) {
	if err := s.check(ctx, "forget", key); err != nil {
		return false, err
	}
	var k string
	var run func(p pipe) *redis.Cmd
	if s.compact {
		ck := s.compactKeyOf(key)
		k = ck.claim
		run = func(p pipe) *redis.Cmd {
			return p.runKeys(compactForgetScript, []string{ck.claim, ck.bucket}, ck.fp, s.nowMs())
		}
	} else {
		k = s.key(key)
		run = func(p pipe) *redis.Cmd { return p.run(forgetScript, k) }
	}
	n, err := s.script(ctx, k, run, forgetDone)
	switch {
	case err != nil:
		return false, s.fail(ctx, "forget", key, err)
	case n == forgetHeld:
		return false, fmt.Errorf("dedupe: redis: forget %s: %w", key, dedupe.ErrInFlight)
	}
	return n == forgetDone, nil
}

// compactForgetScript is forgetScript on the compact layout: the claim key
// KEYS[1] holding a claim (any value but a result "m:…" or fences "r:…")
// is forgetHeld, changing nothing; otherwise the fingerprint ARGV[1] is
// dropped from the bucket KEYS[2] and a result from KEYS[1], and the script
// returns forgetDone if the bucket held a live mark, forgetAbsent if not.
var compactForgetScript = redis.NewScript(liveLua + `
local v = redis.call('GET', KEYS[1])
local head = v and string.sub(v, 1, 2)
if v and head ~= 'm:' and head ~= 'r:' then
	return 2
end
if head == 'm:' then
	redis.call('DEL', KEYS[1])
end
local found = live(KEYS[2], ARGV[1], tonumber(ARGV[2]))
redis.call('HDEL', KEYS[2], ARGV[1])
if found > 0 then
	return 1
end
return 0
`)
