package deduperedis

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"strconv"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
)

// The compact layout ([Config.Compact]; docs/internals-redis.md, "Compact
// layout"):
//
// A message key k has a fingerprint, the first 8 bytes of SHA-256 over
// k's channel, length-prefixed, and message id, and a shard, 32 other bits of
// that hash modulo [Config.Shards]. Both Redis keys of k start with its
// shard's base, Prefix + "{" + shard in hex + "}", so that they share one
// hash slot, and either is computed from k alone:
//
//   - base + "m": the shard's bucket, a hash whose fields are the
//     fingerprints of its marks, each with its expiry, in milliseconds of
//     the server's clock (Unix time). A mark is live while its expiry is
//     after the server's TIME, so a mark is read as absent from its expiry
//     on, to the millisecond. The bucket expires (PEXPIREAT) with the latest
//     of its marks, as a whole; until then a Mark that adds a field beyond
//     pruneAt drops the expired ones, so that the bucket stays a listpack.
//   - base + "c:" + channel + ":" + id: the claim or the result of k, a
//     string exactly as in the plain layout ("c:token", "r: fences", or
//     "m:" + result, expiring with the mark), but never a bare mark.
//
// Every call is one script on these two keys, which reads the server's clock
// (TIME), so the server decides expiry here too.

// defaultShards is [Config.Shards] when zero: 16,384 shards keep a bucket
// of a million live marks at 61 fingerprints on average, and the fullest at
// about 95, under the 128 entries (hash-max-listpack-entries) that Redis
// keeps in a listpack.
const defaultShards = 16384

// pruneAt is how many fields a bucket holds before a Mark that adds one
// drops the expired: below the 128 of hash-max-listpack-entries, so that the
// expired fields of a bucket that still has live marks do not push it out
// of the listpack encoding.
const pruneAt = 100

// fingerprintSize is the width of a mark's fingerprint in bytes.
const fingerprintSize = 8

// compactKey is where the compact layout keeps a message key.
type compactKey struct {
	claim  string // base + "c:" + channel + ":" + id
	bucket string // base + "m"
	fp     string // the fingerprint, fingerprintSize raw bytes
}

// compactKeyOf returns where the compact layout keeps k.
func (s *Store) compactKeyOf(k dedupe.Key) compactKey {
	bucket, fp := s.bucketOf(k)
	base := bucket[:len(bucket)-1] // without the "m"
	return compactKey{claim: base + "c:" + k.Channel + ":" + k.MessageID, bucket: bucket, fp: fp}
}

// bucketOf returns the bucket of k and k's fingerprint.
func (s *Store) bucketOf(k dedupe.Key) (bucket, fp string) {
	var buf [128]byte // on the stack for keys up to about 120 bytes
	text := binary.AppendUvarint(buf[:0], uint64(len(k.Channel)))
	text = append(append(text, k.Channel...), k.MessageID...)
	sum := sha256.Sum256(text)
	shard := binary.BigEndian.Uint32(sum[fingerprintSize:]) % uint32(s.shards)
	name := append(append(buf[:0], s.prefix...), '{')
	name = append(strconv.AppendUint(name, uint64(shard), 16), '}', 'm')
	return string(name), string(sum[:fingerprintSize])
}

// liveLua defines servertime(), the server's time in Unix milliseconds, and
// live(bucket, fp, now), the expiry of fp's mark in bucket if it is after
// now, and 0 otherwise.
const liveLua = `
local function servertime()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function live(bucket, fp, now)
	local v = tonumber(redis.call('HGET', bucket, fp))
	if v and v > now then
		return v
	end
	return 0
end
`

// compactExistsScript returns 1 if the bucket KEYS[1] holds a live mark of
// the fingerprint ARGV[1], and 0 otherwise.
var compactExistsScript = redis.NewScript(liveLua + `
if live(KEYS[1], ARGV[1], servertime()) > 0 then
	return 1
end
return 0
`)

// compactClaimScript is claimScript on the claim key KEYS[1], for the token
// ARGV[1] and ARGV[2] ms, after reading the bucket KEYS[2] for a live mark
// of the fingerprint ARGV[3]: a mark found there is claimMarked, in the
// same atomic step.
var compactClaimScript = redis.NewScript(liveLua + `
if live(KEYS[2], ARGV[3], servertime()) > 0 then
	return 2
end
` + claimLua)

// compactMarkScript marks the fingerprint ARGV[1] in the bucket KEYS[2] for
// ARGV[2] ms, replacing its expiry, lengthens the bucket's expiry to the
// mark's if it is shorter, and sets the claim key KEYS[1] to "m:" + the
// result ARGV[3], expiring with the mark, or deletes it if ARGV[3] is empty:
// a mark replaces any claim, mark or result. A field added beyond ARGV[5]
// (pruneAt) drops the bucket's expired fields. It returns 1.
//
// With ARGV[4] = "1" (MarkUntil) a live mark that lasts at least as long is
// kept as it is, with its result, and the script returns 0; one that ends
// sooner is lengthened, its result with it, and the script returns 0; a key
// without a live mark is marked, and the script returns 1.
var compactMarkScript = redis.NewScript(liveLua + `
local now = servertime()
local e = now + tonumber(ARGV[2])
local keep = ARGV[4] == '1'
local found = 0
if keep then
	found = live(KEYS[2], ARGV[1], now)
	if found >= e then
		return 0
	end
end
if redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', e)) == 1 and
		redis.call('HLEN', KEYS[2]) > tonumber(ARGV[5]) then
	local all, expired = redis.call('HGETALL', KEYS[2]), {}
	for i = 1, #all, 2 do
		if tonumber(all[i + 1]) <= now then
			expired[#expired + 1] = all[i]
		end
	end
	if #expired > 0 then
		redis.call('HDEL', KEYS[2], unpack(expired))
	end
end
if redis.call('PTTL', KEYS[2]) < e - now then
	redis.call('PEXPIREAT', KEYS[2], string.format('%d', e))
end
if ARGV[3] ~= '' then
	redis.call('SET', KEYS[1], 'm:' .. ARGV[3], 'PXAT', string.format('%d', e))
elseif keep and found > 0 then
	local v = redis.call('GET', KEYS[1])
	if v and string.sub(v, 1, 2) == 'm:' then
		redis.call('PEXPIREAT', KEYS[1], string.format('%d', e))
	elseif v then
		redis.call('DEL', KEYS[1])
	end
else
	redis.call('DEL', KEYS[1])
end
if found > 0 then
	return 0
end
return 1
`)

// compactResultScript returns the value of the claim key KEYS[1] if it
// holds a result ("m:" + result), "m" if the bucket KEYS[2] holds a live
// mark of the fingerprint ARGV[1] without one, and "" otherwise.
var compactResultScript = redis.NewScript(liveLua + `
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'm:' then
	return v
end
if live(KEYS[2], ARGV[1], servertime()) > 0 then
	return 'm'
end
return ''
`)

// compactMarkArgs returns the arguments of compactMarkScript for ck, a mark
// of ttl ms with result (nil: none), and keep for MarkUntil.
func compactMarkArgs(ck compactKey, ttl int64, result []byte, keep bool) []any {
	k := "0"
	if keep {
		k = "1"
	}
	if result == nil {
		result = []byte{}
	}
	return []any{ck.fp, ttl, result, k, pruneAt}
}

// existsCompact is Exists on the compact layout: one script call.
func (s *Store) existsCompact(ctx context.Context, key dedupe.Key) (bool, error) {
	bucket, fp := s.bucketOf(key)
	var n int64
	err := s.do(ctx, bucket, func(p pipe) func() error {
		cmd := p.runKeys(compactExistsScript, []string{bucket}, fp)
		return func() (err error) {
			n, err = cmd.Int64()
			return err
		}
	})
	if err != nil {
		return false, s.fail(ctx, "exists", key, err)
	}
	return n == 1, nil
}

// markCompactRun queues compactMarkScript on p for key, for ttl ms, with
// value, markValue or "m:" and the result's bytes (see Store.mark), and
// keep for MarkUntil.
func (s *Store) markCompactRun(p pipe, key dedupe.Key, value any, ttl int64, keep bool) *redis.Cmd {
	return markRun(p, s.compactKeyOf(key), value, ttl, keep)
}

// markRun is markCompactRun with the key's place ck.
func markRun(p pipe, ck compactKey, value any, ttl int64, keep bool) *redis.Cmd {
	var result []byte
	if v, ok := value.([]byte); ok {
		result = v[len(resultPrefix):]
	}
	return p.runKeys(compactMarkScript, []string{ck.claim, ck.bucket}, compactMarkArgs(ck, ttl, result, keep)...)
}

// markCompact is mark on the compact layout, with value as Store.mark has
// it: one script call, which waits for the replicas if the store does.
func (s *Store) markCompact(ctx context.Context, key dedupe.Key, value any, ttl int64) error {
	ck := s.compactKeyOf(key)
	err := s.do(ctx, ck.claim, func(p pipe) func() error {
		cmd, replicated := markRun(p, ck, value, ttl, false), p.need()
		return func() error {
			if err := cmd.Err(); err != nil {
				return err
			}
			return replicated()
		}
	})
	if err != nil {
		return s.fail(ctx, "mark", key, err)
	}
	return nil
}

// resultCompact is Result on the compact layout: one script call.
func (s *Store) resultCompact(ctx context.Context, key dedupe.Key) ([]byte, bool, error) {
	ck := s.compactKeyOf(key)
	var v string
	err := s.do(ctx, ck.claim, func(p pipe) func() error {
		cmd := p.runKeys(compactResultScript, []string{ck.claim, ck.bucket}, ck.fp)
		return func() (err error) {
			v, err = cmd.Text()
			return err
		}
	})
	if err != nil {
		return nil, false, s.fail(ctx, "result", key, err)
	}
	result, marked := parseMark(v)
	return result, marked, nil
}

// claimRun queues the claim script of c's key, for the token and lease ms,
// on p: claimScript on the plain layout, compactClaimScript on the compact
// one.
func (s *Store) claimRun(p pipe, c dedupe.Claim, key string, lease int64) *redis.Cmd {
	if !s.compact {
		return p.run(claimScript, key, c.Token, lease)
	}
	return claimCompact(p, s.compactKeyOf(c.Key), c.Token, lease)
}

// claimCompact queues compactClaimScript on p for the key at ck.
func claimCompact(p pipe, ck compactKey, token string, lease int64) *redis.Cmd {
	return p.runKeys(compactClaimScript, []string{ck.claim, ck.bucket}, token, lease, ck.fp)
}

// claimCall returns the Redis key of c's claim and the function that queues
// its claim script, for lease ms, on a pipe.
func (s *Store) claimCall(c dedupe.Claim, lease int64) (string, func(p pipe) *redis.Cmd) {
	if !s.compact {
		k := s.key(c.Key)
		return k, func(p pipe) *redis.Cmd { return p.run(claimScript, k, c.Token, lease) }
	}
	ck := s.compactKeyOf(c.Key)
	return ck.claim, func(p pipe) *redis.Cmd { return claimCompact(p, ck, c.Token, lease) }
}
