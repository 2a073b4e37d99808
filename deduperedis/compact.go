package deduperedis

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
//     fingerprints of its marks, each with its expiry, in Unix milliseconds
//     of the gateway's clock: the time of the Mark plus its TTL. A mark is
//     live while its expiry is after the clock of the gateway that reads it,
//     to the millisecond. The bucket expires with the latest of its marks,
//     as a whole, and never before it: its expiry is only ever lengthened,
//     relative to the server's clock (PEXPIRE), to the TTL the mark has
//     left on the gateway's, and a bucket found without one gets the latest
//     of its fields' (lengthen in liveLua). Until then a Mark that adds a
//     field beyond pruneAt drops the expired ones, so that the bucket stays
//     a listpack.
//   - base + "c:" + channel + ":" + id: the claim or the result of k, a
//     string exactly as in the plain layout ("c:token", "r: fences", or
//     "m:" + result, expiring with the mark), but never a bare mark.
//
// Exists is one HGET. Mark is one round trip of plain commands (markPlain),
// in this order: PEXPIRE GT of the bucket, HSET of the fingerprint, HLEN,
// PEXPIRE NX of the bucket (the PEXPIREs when the store has not set its
// expiry that far yet, see expiries), PTTL of the bucket, and SET PX or DEL
// of the claim key. Claim is one round trip of SET NX GET of the
// claim key, then HGET of the fingerprint. Whatever runs between Mark's
// commands, a Claim sees either the claim, still there, or the mark, already
// there, and a mark wins (claimCompact). The rarer calls (Claim's harder
// cases, Result, Forget, ClaimEach, MarkEach, MarkUntil) are each one
// script on the two keys, given the gateway's time; so is every call on a
// server older than Redis 7.0, which lacks SET NX GET and PEXPIRE NX/GT.
//
// The time a mark ends is read by the gateway's clock, not the server's
// (TIME), because the calls that carry nearly all the traffic run no
// script: a script call costs the server several times what a plain
// command costs (docs/performance.md, issue 38). Gateways whose clocks
// differ by d see a mark end up to d apart; NTP keeps d to milliseconds.
// No gateway's absolute time reaches the server: it is sent durations
// (PEXPIRE, PX), so a server clock off by any amount does not end a bucket
// or a result early (issue 44).

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
	shard  uint32 // the bucket's shard, for expiries
}

// compactKeyOf returns where the compact layout keeps k.
func (s *Store) compactKeyOf(k dedupe.Key) compactKey {
	bucket, fp, shard := s.bucketOf(k)
	base := bucket[:len(bucket)-1] // without the "m"
	return compactKey{claim: base + "c:" + k.Channel + ":" + k.MessageID, bucket: bucket, fp: fp, shard: shard}
}

// bucketOf returns the bucket of k, k's fingerprint and its shard.
func (s *Store) bucketOf(k dedupe.Key) (bucket, fp string, shard uint32) {
	var buf [128]byte // on the stack for keys up to about 120 bytes
	text := binary.AppendUvarint(buf[:0], uint64(len(k.Channel)))
	text = append(append(text, k.Channel...), k.MessageID...)
	sum := sha256.Sum256(text)
	shard = binary.BigEndian.Uint32(sum[fingerprintSize:]) % uint32(s.shards)
	name := append(append(buf[:0], s.prefix...), '{')
	name = append(strconv.AppendUint(name, uint64(shard), 16), '}', 'm')
	return string(name), string(sum[:fingerprintSize]), shard
}

// expiryStep returns the step, in ms, to which Mark rounds up its bucket's
// expiry for a mark of ttl ms: an eighth of the TTL, and at least a minute.
// A Mark sends PEXPIRE only when the store has not yet set its bucket's
// expiry to the mark's or later (expiries). With Shards sized as the doc
// says (live marks / 64), a bucket gets a mark every TTL / 64, so about one
// Mark in eight sends it; a bucket outlives its last mark by at most the
// step.
func expiryStep(ttl int64) int64 { return max(ttl/8, 60_000) }

// expirySlots is how many buckets' expiries a store remembers at most.
const expirySlots = 1 << 16

// expiries remembers, per bucket, the latest expiry this store set on it: a
// direct-mapped table, by shard mod expirySlots, of shard / expirySlots << 48
// | the expiry in Unix ms of the gateway's clock. What it remembers is a
// lower bound of the bucket's expiry on the server while the bucket lives:
// expiries only grow there (PEXPIRE GT, NX, lengthen), and a bucket that
// expired is past what is remembered. A bucket deleted and made again (by
// Forget or a prune that emptied it, FLUSHALL, a restart) is not: every
// Mark reads the bucket's PTTL, and one that finds no expiry or a shorter
// one than its mark's has the tend script lengthen it (markCompact). A
// failover may lose a PEXPIRE: the table is forgotten on any error of a
// compact Claim or Mark but the caller's own context ending, and before
// the store sends a call again on a cluster, as a failover gives.
type expiries struct {
	once  sync.Once
	slots []atomic.Uint64
}

// expiryMask keeps an expiry's 48 bits, in Unix ms, of a slot.
const expiryMask = 1<<48 - 1

// covers reports whether the store set shard's bucket to expire at e (Unix
// ms) or later.
func (x *expiries) covers(shard uint32, e int64) bool {
	x.once.Do(func() { x.slots = make([]atomic.Uint64, expirySlots) })
	v := x.slots[shard%expirySlots].Load()
	return uint32(v>>48) == shard/expirySlots && int64(v&expiryMask) >= e
}

// set remembers that the store set shard's bucket to expire at e.
func (x *expiries) set(shard uint32, e int64) {
	x.slots[shard%expirySlots].Store(uint64(shard/expirySlots)<<48 | uint64(e)&expiryMask)
}

// forget forgets every bucket's expiry.
func (x *expiries) forget() {
	x.once.Do(func() { x.slots = make([]atomic.Uint64, expirySlots) })
	for i := range x.slots {
		x.slots[i].Store(0)
	}
}

// liveLua defines live(bucket, fp, now), the expiry of fp's mark in bucket
// if it is after now (Unix milliseconds of the gateway's clock), and 0
// otherwise; prune(bucket, now), which drops the expired fields of bucket;
// and lengthen(bucket, now, want, step), which makes bucket last at least
// want ms more, and at least as long as its latest field, if it does not
// already last want ms (or has no expiry at all): it rounds want up so that
// the bucket expires on a multiple of step ms, takes the latest field's
// expiry if that is later, and sets it by PEXPIRE, relative to the server's
// clock. It only ever lengthens a bucket's expiry, and it gives one that
// has none (made again by HSET after a Forget, FLUSHALL or a restart) the
// latest of its fields'.
const liveLua = `
local function live(bucket, fp, now)
	local v = tonumber(redis.call('HGET', bucket, fp))
	if v and v > now then
		return v
	end
	return 0
end
local function prune(bucket, now)
	local all, expired = redis.call('HGETALL', bucket), {}
	for i = 1, #all, 2 do
		if tonumber(all[i + 1]) <= now then
			expired[#expired + 1] = all[i]
		end
	end
	if #expired > 0 then
		redis.call('HDEL', bucket, unpack(expired))
	end
	return #expired
end
local function lengthen(bucket, now, want, step)
	local left = redis.call('PTTL', bucket)
	if left == -2 or (left ~= -1 and left >= want) then
		return 0
	end
	want = math.floor((now + want + step - 1) / step) * step - now
	for _, v in ipairs(redis.call('HVALS', bucket)) do
		want = math.max(want, (tonumber(v) or 0) - now)
	end
	if left ~= -1 and left >= want then
		return 0
	end
	redis.call('PEXPIRE', bucket, string.format('%d', want))
	return 1
end
`

// compactClaimScript is claimScript on the claim key KEYS[1], for the token
// ARGV[1] and ARGV[2] ms, after reading the bucket KEYS[2] for a mark of the
// fingerprint ARGV[3] live at ARGV[4] (Unix ms): a mark found there is
// claimMarked, in the same atomic step.
var compactClaimScript = redis.NewScript(`
local e = tonumber(redis.call('HGET', KEYS[2], ARGV[3]))
if e and e > tonumber(ARGV[4]) then
	return 2
end
` + claimLua)

// compactUnclaimScript deletes the claim key KEYS[1] if it holds ARGV[1],
// a claim that claimCompact took on a key it then found marked.
var compactUnclaimScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
	return redis.call('DEL', KEYS[1])
end
return 0
`)

// compactTendScript looks after the bucket KEYS[1] at ARGV[1] (Unix ms of
// the gateway's clock): if it holds more than ARGV[2] (pruneAt) fields, it
// drops the expired ones; then it lengthens the bucket's expiry to at least
// ARGV[3] ms from now and its latest field's, rounded up to a multiple of
// ARGV[4] ms, if it is shorter than ARGV[3] ms or has none (lengthen). It
// returns 1 if it set the expiry.
var compactTendScript = redis.NewScript(liveLua + `
local now = tonumber(ARGV[1])
if redis.call('HLEN', KEYS[1]) > tonumber(ARGV[2]) then
	prune(KEYS[1], now)
end
return lengthen(KEYS[1], now, tonumber(ARGV[3]), tonumber(ARGV[4]))
`)

// compactMarkScript marks the fingerprint ARGV[1] in the bucket KEYS[2] for
// ARGV[2] ms from ARGV[6] (Unix ms of the gateway's clock), replacing its
// expiry; lengthens the bucket's expiry, if it is shorter than ARGV[2] ms or
// has none, to the mark's and its latest field's, rounded up to a multiple
// of ARGV[7] ms (lengthen); and sets the claim key KEYS[1] to "m:" + the
// result ARGV[3] for ARGV[2] ms (PX, on the server's clock), or deletes it
// if ARGV[3] is empty: a mark replaces any claim, mark or result. A field
// added beyond ARGV[5] (pruneAt) drops the bucket's expired fields. It
// returns 1.
//
// With ARGV[4] = "1" (MarkUntil) a live mark that lasts at least as long is
// kept as it is, with its result, and the script returns 0; one that ends
// sooner is lengthened, its result with it, and the script returns 0; a key
// without a live mark is marked, and the script returns 1.
var compactMarkScript = redis.NewScript(liveLua + `
local now, ttl = tonumber(ARGV[6]), tonumber(ARGV[2])
local e = now + ttl
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
	prune(KEYS[2], now)
end
lengthen(KEYS[2], now, ttl, tonumber(ARGV[7]))
if ARGV[3] ~= '' then
	redis.call('SET', KEYS[1], 'm:' .. ARGV[3], 'PX', ARGV[2])
elseif keep and found > 0 then
	local v = redis.call('GET', KEYS[1])
	if v and string.sub(v, 1, 2) == 'm:' then
		redis.call('PEXPIRE', KEYS[1], ARGV[2])
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
// holds a result ("m:" + result), "m" if the bucket KEYS[2] holds a mark of
// the fingerprint ARGV[1] live at ARGV[2] (Unix ms) without one, and ""
// otherwise.
var compactResultScript = redis.NewScript(liveLua + `
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 2) == 'm:' then
	return v
end
if live(KEYS[2], ARGV[1], tonumber(ARGV[2])) > 0 then
	return 'm'
end
return ''
`)

// nowMs is the compact layout's time: the gateway's clock (Store.now), in
// Unix milliseconds.
func (s *Store) nowMs() int64 {
	if s.now != nil {
		return s.now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

// compactMarkArgs returns the arguments of compactMarkScript for ck, a mark
// of ttl ms with result (nil: none), and keep for MarkUntil, at now (Unix
// ms of the gateway's clock).
func compactMarkArgs(ck compactKey, ttl int64, result []byte, keep bool, now int64) []any {
	k := "0"
	if keep {
		k = "1"
	}
	if result == nil {
		result = []byte{}
	}
	return []any{ck.fp, ttl, result, k, pruneAt, now, expiryStep(ttl)}
}

// existsCompact is Exists on the compact layout: one HGET.
func (s *Store) existsCompact(ctx context.Context, key dedupe.Key) (bool, error) {
	bucket, fp, _ := s.bucketOf(key)
	var v string
	err := s.do(ctx, bucket, func(p pipe) func() error {
		cmd := p.HGet(p.ctx, bucket, fp)
		return func() (err error) {
			if v, err = cmd.Result(); err == redis.Nil {
				err = nil
			}
			return err
		}
	})
	if err != nil {
		return false, s.fail(ctx, "exists", key, err)
	}
	return expiryOf(v) > s.nowMs(), nil
}

// expiryOf returns the expiry a bucket's field holds, v, and 0 for no field
// ("") or a value that is not a number.
func expiryOf(v string) int64 {
	if v == "" {
		return 0 // ParseInt would allocate its error
	}
	e, _ := strconv.ParseInt(v, 10, 64)
	return e
}

// markCompactRun queues compactMarkScript on p for key, for ttl ms, with
// value, markValue or "m:" and the result's bytes (see Store.mark), and
// keep for MarkUntil.
func (s *Store) markCompactRun(p pipe, key dedupe.Key, value any, ttl int64, keep bool) *redis.Cmd {
	return markRun(p, s.compactKeyOf(key), value, ttl, keep, s.nowMs())
}

// markRun is markCompactRun with the key's place ck, at now.
func markRun(p pipe, ck compactKey, value any, ttl int64, keep bool, now int64) *redis.Cmd {
	var result []byte
	if v, ok := value.([]byte); ok {
		result = v[len(resultPrefix):]
	}
	return p.runKeys(compactMarkScript, []string{ck.claim, ck.bucket}, compactMarkArgs(ck, ttl, result, keep, now)...)
}

// markOutcome is what the plain commands of markCompact found.
type markOutcome struct {
	lost bool // the bucket was gone after the HSET: the mark may be lost
	fix  bool // the bucket may expire before the mark: lengthen it
	tend bool // the HSET took the bucket past pruneAt fields
}

// markCompact is mark on the compact layout, with value as Store.mark has
// it: one round trip of plain commands (markPlain), which waits for the
// replicas if the store does. What the bucket's PTTL shows after the HSET
// decides whether a second round trip is needed: compactTendScript, if the
// bucket has no expiry or may expire before the mark (then Mark fails if it
// fails), or to drop expired fields past pruneAt (best effort: a failure
// leaves them to the next such Mark); compactMarkScript, all over again, if
// the bucket was gone after the HSET. A server that does not know PEXPIRE
// NX and GT (before Redis 7.0) has the store run the layout's scripts from
// then on (Store.scripted).
func (s *Store) markCompact(ctx context.Context, key dedupe.Key, value any, ttl int64) error {
	ck := s.compactKeyOf(key)
	scripted := func(p pipe) func() error {
		cmd, replicated := markRun(p, ck, value, ttl, false, s.nowMs()), p.need()
		return func() error { return errors.Join(cmd.Err(), replicated()) }
	}
	var out markOutcome
	// The last attempt sent plain commands. Atomic: a call whose context
	// ended returns while its round, run by the batcher, may still set it.
	var plain atomic.Bool
	err := s.do(ctx, ck.claim, func(p pipe) func() error {
		if plain.Store(!s.scripted.Load()); !plain.Load() {
			return scripted(p)
		}
		return s.markPlain(p, ck, value, ttl, &out)
	})
	switch {
	case err != nil && plain.Load() && refusedAsOld(err): // also if a concurrent call switched already
		s.scripted.Store(true)
		return s.markCompact(ctx, key, value, ttl)
	case err == nil && out.lost:
		err = s.do(ctx, ck.claim, scripted)
	case err == nil && (out.fix || out.tend):
		err = s.do(ctx, ck.bucket, func(p pipe) func() error {
			return p.run(compactTendScript, ck.bucket, s.nowMs(), pruneAt, ttl, expiryStep(ttl)).Err
		})
		if !out.fix {
			err = nil // pruning only: best effort
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			s.expiries.forget()
		}
		return s.fail(ctx, "mark", key, err)
	}
	return nil
}

// markPlain queues Mark's plain commands on p, in this order: PEXPIRE GT of
// the bucket, HSET of the fingerprint, HLEN, PEXPIRE NX of the bucket, PTTL
// of the bucket, and SET PX or DEL of the claim key; the two PEXPIREs only
// when the store has not set the bucket's expiry that far yet (expiries).
// The PEXPIREs are relative, to the mark's expiry rounded up to expiryStep:
// the first keeps a bucket that has an expiry from ending before the HSET,
// the second gives one made by the HSET an expiry. It returns the function
// that reads their replies into out.
func (s *Store) markPlain(p pipe, ck compactKey, value any, ttl int64, out *markOutcome) func() error {
	now := s.nowMs()
	e, step := now+ttl, expiryStep(ttl)
	until := (e + step - 1) / step * step
	q, send := p.pipelined()
	covered := s.expiries.covers(ck.shard, e)
	var gt, nx redis.Cmder
	if !covered {
		gt = q.Do(p.ctx, "pexpire", ck.bucket, until-now, "gt")
	}
	added := q.HSet(p.ctx, ck.bucket, ck.fp, e)
	size := q.HLen(p.ctx, ck.bucket)
	if !covered {
		nx = q.Do(p.ctx, "pexpire", ck.bucket, until-now, "nx")
	}
	left := q.PTTL(p.ctx, ck.bucket)
	var claim redis.Cmder
	if v, ok := value.([]byte); ok {
		claim = q.Set(p.ctx, ck.claim, v, time.Duration(ttl)*time.Millisecond)
	} else {
		claim = q.Del(p.ctx, ck.claim)
	}
	replicated := p.need()
	send()
	return func() error {
		for _, c := range [...]redis.Cmder{gt, added, size, nx, left, claim} {
			if c == nil {
				continue
			}
			if err := c.Err(); err != nil {
				return err
			}
		}
		pttl := left.Val()
		setNX := nx != nil && nx.(*redis.Cmd).Val() == int64(1)
		*out = markOutcome{
			lost: pttl == -2,
			fix:  pttl == -1 || pttl < time.Duration(ttl)*time.Millisecond || setNX && size.Val() > 1,
			tend: added.Val() == 1 && size.Val() > pruneAt,
		}
		if !covered && !out.fix && !out.lost {
			s.expiries.set(ck.shard, until)
		}
		return replicated()
	}
}

// refusedAsOld reports whether err is a server's refusal of a form of a
// command that Redis 7.0 added, which the compact layout's plain commands
// use: "ERR syntax error" for SET with both NX and GET (Redis 6.2, which
// added GET, refuses it with NX) and "ERR wrong number of arguments for
// 'pexpire' command" for PEXPIRE's NX and GT (before 7.0 it takes exactly
// two arguments). The prefix "ERR " is compared here, not by
// redis.HasErrorPrefix, which drops it before comparing.
func refusedAsOld(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	return strings.HasPrefix(msg, "ERR syntax error") ||
		strings.HasPrefix(msg, "ERR wrong number of arguments for 'pexpire'")
}

// claimCompact is Claim on the compact layout, for lease ms: SET NX GET of
// the claim key, then HGET of the mark, in one round trip, and in this
// order, so that a mark made before the SET, or between the two, is seen
// (Mark sets the fingerprint before it deletes the claim). It returns the
// outcome compactClaimScript would:
//
//   - a live mark: claimMarked, and a claim the SET took is deleted again,
//     in a second round trip (best effort: it expires with its lease);
//   - the SET took the key: claimTaken, once the replicas confirm it if
//     the store waits for them;
//   - a result, or another token's claim: claimMarked or claimHeld;
//   - the caller's own claim, or released tokens (fences): the script
//     decides, in a second round trip.
//
// A server that does not know SET NX GET (before Redis 7.0) has the store
// run the layout's scripts from then on (Store.scripted).
func (s *Store) claimCompact(ctx context.Context, c dedupe.Claim, lease int64) (int64, error) {
	ck := s.compactKeyOf(c.Key)
	value := "c:" + c.Token
	var prev string
	var taken, marked bool
	err := s.do(ctx, ck.claim, func(p pipe) func() error {
		q, send := p.pipelined()
		set := q.Do(p.ctx, "set", ck.claim, value, "px", lease, "nx", "get")
		get := q.HGet(p.ctx, ck.bucket, ck.fp)
		replicated := p.need()
		send()
		return func() (err error) {
			taken, marked = false, false
			if prev, err = set.Text(); err == redis.Nil {
				prev, err, taken = "", nil, true
			}
			if err != nil {
				return err
			}
			v, err := get.Result()
			if err != nil && err != redis.Nil {
				return err
			}
			if marked = expiryOf(v) > s.nowMs(); taken && !marked {
				return replicated()
			}
			return nil
		}
	})
	if err != nil && ctx.Err() == nil {
		s.expiries.forget()
	}
	switch {
	case err != nil && refusedAsOld(err): // also if a concurrent call switched already
		s.scripted.Store(true)
		return s.claimScripted(ctx, ck, c.Token, lease)
	case err != nil:
		return 0, err
	case marked:
		if taken {
			_ = s.do(ctx, ck.claim, func(p pipe) func() error {
				return p.run(compactUnclaimScript, ck.claim, value).Err
			})
		}
		return claimMarked, nil
	case taken:
		return claimTaken, nil
	case prev == markValue || strings.HasPrefix(prev, resultPrefix):
		return claimMarked, nil
	}
	if owner, _, _ := strings.Cut(strings.TrimPrefix(prev, "c:"), " "); strings.HasPrefix(prev, "c:") && owner != c.Token {
		return claimHeld, nil
	}
	return s.claimScripted(ctx, ck, c.Token, lease)
}

// claimScripted is Claim on the compact layout by compactClaimScript, the
// key at ck, for token and lease ms.
func (s *Store) claimScripted(ctx context.Context, ck compactKey, token string, lease int64) (int64, error) {
	return s.script(ctx, ck.claim, func(p pipe) *redis.Cmd { return claimCompact(p, ck, token, lease, s.nowMs()) }, claimTaken)
}

// resultCompact is Result on the compact layout: one script call.
func (s *Store) resultCompact(ctx context.Context, key dedupe.Key) ([]byte, bool, error) {
	ck := s.compactKeyOf(key)
	var v string
	err := s.do(ctx, ck.claim, func(p pipe) func() error {
		cmd := p.runKeys(compactResultScript, []string{ck.claim, ck.bucket}, ck.fp, s.nowMs())
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
	return claimCompact(p, s.compactKeyOf(c.Key), c.Token, lease, s.nowMs())
}

// claimCompact queues compactClaimScript on p for the key at ck, at now
// (Unix ms of the gateway's clock).
func claimCompact(p pipe, ck compactKey, token string, lease, now int64) *redis.Cmd {
	return p.runKeys(compactClaimScript, []string{ck.claim, ck.bucket}, token, lease, ck.fp, now)
}

// claimCall returns the Redis key of c's claim and the function that queues
// its claim script, for lease ms, on a pipe.
func (s *Store) claimCall(c dedupe.Claim, lease int64) (string, func(p pipe) *redis.Cmd) {
	if !s.compact {
		k := s.key(c.Key)
		return k, func(p pipe) *redis.Cmd { return p.run(claimScript, k, c.Token, lease) }
	}
	ck := s.compactKeyOf(c.Key)
	return ck.claim, func(p pipe) *redis.Cmd { return claimCompact(p, ck, c.Token, lease, s.nowMs()) }
}
