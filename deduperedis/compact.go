package deduperedis

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"math/bits"
	"strconv"

	"github.com/gatewaykit/dedupe"
	"github.com/redis/go-redis/v9"
)

// The compact layout ([Config.Compact]; docs/internals-redis.md, "Compact
// layout"):
//
// A message key k has a fingerprint, the first 8 bytes of SHA-256 over
// k's channel, length-prefixed, and message id, and a shard, 32 other bits of
// that hash modulo [Config.Shards]. Every Redis key of a shard starts with
// its base, Prefix + "{" + shard in hex + "}", so that the shard's keys share
// one hash slot:
//
//   - base + "c:" + channel + ":" + id: the claim or the result of k, a
//     string exactly as in the plain layout ("c:token", "r: fences", or
//     "m:" + result, expiring with the mark), but never a bare mark.
//   - base + "b" + class + ":" + window: a bucket, a hash whose fields are
//     the fingerprints of the marks that expire in that window. A mark of
//     ttl milliseconds written at server time now, expiring at e = now+ttl,
//     has the class c of the window length g = 2^c ms, the largest power
//     of two not over ttl/4 (1 ms at least), and goes in window w =
//     ceil(e/g), whose bucket expires (PEXPIREAT) at w×g. The field's value
//     is w×g - e, the milliseconds the mark ends before its bucket, so a
//     mark is read as absent from e on, to the millisecond, while its bytes
//     stay until the bucket expires, at most a quarter of the TTL later.
//   - base + "i": the shard's index, a hash of class → the latest window
//     written in that class, which expires with the latest of its buckets.
//
// A mark is found by reading, for each class of the index, the buckets of
// the windows still live (w×g after now) up to the latest: a few HGET in one
// script. Every script reads the server's clock (TIME), so the server
// decides expiry here too.

// defaultShards is [Config.Shards] when zero: 16,384 shards keep a bucket
// of 1M marks written in one window at 61 fingerprints on average, under the
// 128 entries (hash-max-listpack-entries) that Redis keeps in a listpack.
const defaultShards = 16384

// fingerprintSize is the width of a mark's fingerprint in bytes.
const fingerprintSize = 8

// compactKey is where the compact layout keeps a message key.
type compactKey struct {
	base  string // Prefix + "{" + shard + "}"
	claim string // base + "c:" + channel + ":" + id
	index string // base + "i"
	fp    string // the fingerprint, fingerprintSize raw bytes
}

// compactKeyOf returns where the compact layout keeps k.
func (s *Store) compactKeyOf(k dedupe.Key) compactKey {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(k.Channel)))])
	h.Write([]byte(k.Channel))
	h.Write([]byte(k.MessageID))
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	shard := binary.BigEndian.Uint32(sum[fingerprintSize:]) % uint32(s.shards)
	base := s.prefix + "{" + strconv.FormatUint(uint64(shard), 16) + "}"
	return compactKey{
		base:  base,
		claim: base + "c:" + k.Channel + ":" + k.MessageID,
		index: base + "i",
		fp:    string(sum[:fingerprintSize]),
	}
}

// windowClass returns the class of a mark of ttl milliseconds: c such that
// the window length 2^c ms is the largest power of two not over ttl/4.
func windowClass(ttl int64) int {
	if ttl < 8 {
		return 0
	}
	return bits.Len64(uint64(ttl/4)) - 1
}

// markedLua defines servertime(), the server's time in milliseconds, and
// marked(index, base, fp, now, all): the expiry (ms) of the live mark of fp
// in the shard of index and base, or 0 if it has none; with all, the latest
// expiry and every bucket of a live window that holds fp, live or not.
const markedLua = `
local function servertime()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function marked(index, base, fp, now, all)
	local found, hits = 0, {}
	local classes = redis.call('HGETALL', index)
	for i = 1, #classes, 2 do
		local g = 2 ^ tonumber(classes[i])
		for w = math.floor(now / g) + 1, tonumber(classes[i + 1]) do
			local b = base .. 'b' .. classes[i] .. ':' .. string.format('%d', w)
			local v = redis.call('HGET', b, fp)
			if v then
				local e = w * g - tonumber(v)
				if e > now then
					if not all then
						return e, hits
					end
					found = math.max(found, e)
				end
				hits[#hits + 1] = b
			end
		end
	end
	return found, hits
end
`

// compactExistsScript returns 1 if the shard of index KEYS[1] (base ARGV[1])
// holds the fingerprint ARGV[2] in a live bucket, and 0 otherwise.
var compactExistsScript = redis.NewScript(markedLua + `
if marked(KEYS[1], ARGV[1], ARGV[2], servertime(), false) > 0 then
	return 1
end
return 0
`)

// compactClaimScript is claimScript on the claim key KEYS[1], for the token
// ARGV[1] and ARGV[2] ms, after checking the buckets of the shard of index
// KEYS[2] (base ARGV[3]) for the fingerprint ARGV[4]: a mark found there is
// claimMarked, in the same atomic step.
var compactClaimScript = redis.NewScript(markedLua + `
if marked(KEYS[2], ARGV[3], ARGV[4], servertime(), false) > 0 then
	return 2
end
` + claimLua)

// compactMarkScript marks the fingerprint ARGV[2] for ARGV[3] ms in class
// ARGV[4] (window length ARGV[5] ms) of the shard of base ARGV[1] and index
// KEYS[2], and sets the claim key KEYS[1] to "m:" + the result ARGV[6],
// expiring with the mark, or deletes it if ARGV[6] is empty: a mark
// replaces any claim, mark or result, and drops the fingerprint from the
// other buckets, so a mark that shortens a TTL holds. It returns 1 if the
// key had no live mark, and 0 if it had one.
//
// With ARGV[7] = "1" (MarkUntil) a live mark that lasts at least as long is
// kept as it is, with its result, and one that ends sooner is moved to the
// later expiry, its result with it.
var compactMarkScript = redis.NewScript(markedLua + `
local now = servertime()
local g = tonumber(ARGV[5])
local e = now + tonumber(ARGV[3])
local w = math.ceil(e / g)
local target = ARGV[1] .. 'b' .. ARGV[4] .. ':' .. string.format('%d', w)
local found, hits = marked(KEYS[2], ARGV[1], ARGV[2], now, true)
local keep = ARGV[7] == '1'
if keep and found >= e then
	return 0
end
for _, b in ipairs(hits) do
	if b ~= target then
		redis.call('HDEL', b, ARGV[2])
	end
end
redis.call('HSET', target, ARGV[2], string.format('%d', w * g - e))
redis.call('PEXPIREAT', target, string.format('%d', w * g))
local top = tonumber(redis.call('HGET', KEYS[2], ARGV[4]) or 0)
if top < w then
	redis.call('HSET', KEYS[2], ARGV[4], string.format('%d', w))
end
if redis.call('PTTL', KEYS[2]) < w * g - now then
	redis.call('PEXPIREAT', KEYS[2], string.format('%d', w * g))
end
local v = redis.call('GET', KEYS[1])
if ARGV[6] ~= '' then
	redis.call('SET', KEYS[1], 'm:' .. ARGV[6], 'PXAT', string.format('%d', e))
elseif keep and found > 0 and v and string.sub(v, 1, 2) == 'm:' then
	redis.call('PEXPIREAT', KEYS[1], string.format('%d', e))
elseif v then
	redis.call('DEL', KEYS[1])
end
if found > 0 then
	return 0
end
return 1
`)

// compactResultScript returns the value of the claim key KEYS[1] if it
// holds a result ("m:" + result), "m" if the shard of index KEYS[2] (base
// ARGV[1]) holds the fingerprint ARGV[2] without one, and "" otherwise.
var compactResultScript = redis.NewScript(markedLua + `
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'm:' then
	return v
end
if marked(KEYS[2], ARGV[1], ARGV[2], servertime(), false) > 0 then
	return 'm'
end
return ''
`)

// compactMarkArgs returns the arguments of compactMarkScript for ck, a mark
// of ttl ms with result (nil: none), and until for MarkUntil.
func compactMarkArgs(ck compactKey, ttl int64, result []byte, until bool) []any {
	class := windowClass(ttl)
	u := "0"
	if until {
		u = "1"
	}
	if result == nil {
		result = []byte{}
	}
	return []any{ck.base, ck.fp, ttl, class, int64(1) << class, result, u}
}

// existsCompact is Exists on the compact layout: one script call.
func (s *Store) existsCompact(ctx context.Context, key dedupe.Key) (bool, error) {
	ck := s.compactKeyOf(key)
	var n int64
	err := s.do(ctx, ck.index, func(p pipe) func() error {
		cmd := p.runKeys(compactExistsScript, []string{ck.index}, ck.base, ck.fp)
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
	ck := s.compactKeyOf(key)
	var result []byte
	if v, ok := value.([]byte); ok {
		result = v[len(resultPrefix):]
	}
	return p.runKeys(compactMarkScript, []string{ck.claim, ck.index}, compactMarkArgs(ck, ttl, result, keep)...)
}

// markCompact is mark on the compact layout, with value as Store.mark has
// it: one script call, which waits for the replicas if the store does.
func (s *Store) markCompact(ctx context.Context, key dedupe.Key, value any, ttl int64) error {
	k := s.key(key)
	err := s.do(ctx, k, func(p pipe) func() error {
		cmd, replicated := s.markCompactRun(p, key, value, ttl, false), p.need()
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
	err := s.do(ctx, ck.index, func(p pipe) func() error {
		cmd := p.runKeys(compactResultScript, []string{ck.claim, ck.index}, ck.base, ck.fp)
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
	ck := s.compactKeyOf(c.Key)
	return p.runKeys(compactClaimScript, []string{ck.claim, ck.index}, c.Token, lease, ck.base, ck.fp)
}
