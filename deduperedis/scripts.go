package deduperedis

import "github.com/redis/go-redis/v9"

// Values stored under a message key. A mark is the single byte "m", or, kept
// with a result ([Store.MarkResult]), "m:" followed by the result's bytes,
// which may be any bytes: the first two bytes alone tell a mark. A claim is
// "c:" followed by its token (see [dedupe.Claim]). The tokens of released
// claims follow, each after a space: they are fenced, for as long as the key
// keeps its value (see releaseScript). A key whose claim was released holds
// "r:" and the fenced tokens, and is absent to any other token. Tokens hold
// no spaces, so " " + token + " " is found in a value only as a fence. Any
// other value found under a key is treated as a claim held by someone else.
const markValue = "m"

// Outcomes of claimScript.
const (
	claimTaken  = 1
	claimMarked = 2
	claimHeld   = 3
)

// claimScript takes KEYS[1] for the token ARGV[1], for ARGV[2] milliseconds,
// and returns claimTaken, or claimMarked for a mark (with a result or
// without), or claimHeld for another token's claim. A claim of the caller's
// own token is renewed and taken again, so a claim retried after a lost reply
// still wins; a fenced token takes nothing (claimHeld), so a claim that
// reaches the server after its own Release, late on another connection,
// strands nothing. A key that holds released tokens is taken as if absent,
// keeping their fences. Release and Extend leave a mark alone, with a result
// or without: they act only on values that start with "c:" (Release also
// "r:").
var claimScript = redis.NewScript(claimLua)

const claimLua = `
local v = redis.call('GET', KEYS[1])
if not v then
	redis.call('SET', KEYS[1], 'c:' .. ARGV[1], 'PX', ARGV[2])
	return 1
end
if v == 'm' or string.sub(v, 1, 2) == 'm:' then
	return 2
end
local owner, fences = string.match(v, '^c:(%S+)(.*)$')
if not owner then
	fences = string.match(v, '^r:(.*)$')
	if not fences then
		return 3
	end
end
if string.find(v .. ' ', ' ' .. ARGV[1] .. ' ', 1, true) then
	return 3
end
if owner == ARGV[1] then
	redis.call('PEXPIRE', KEYS[1], ARGV[2])
	return 1
end
if owner then
	return 3
end
redis.call('SET', KEYS[1], 'c:' .. ARGV[1] .. fences, 'PX', ARGV[2])
return 1
`

// releaseScript drops the claim of the token ARGV[1] from KEYS[1] and returns
// 1 if the key held it, and 0 otherwise. Either way it fences the token, so
// that a Claim sent with it before the Release but arriving after it takes
// nothing: the key then holds "r:" and the fenced tokens for ARGV[2]
// milliseconds, or, if another token's claim holds it, that claim with the
// token added to its fences and its expiry kept. A mark is left alone: a late
// claim finds it a duplicate. At most the last eight tokens are fenced.
var releaseScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
local owner, fences = nil, ''
if v then
	owner, fences = string.match(v, '^c:(%S+)(.*)$')
	if not owner then
		fences = string.match(v, '^r:(.*)$')
		if not fences then
			return 0
		end
	end
end
local kept = {}
for f in string.gmatch(fences, '%S+') do
	if f ~= ARGV[1] then
		kept[#kept + 1] = f
	end
end
local list = ''
for i = math.max(1, #kept - 6), #kept do
	list = list .. ' ' .. kept[i]
end
list = list .. ' ' .. ARGV[1]
if owner and owner ~= ARGV[1] then
	local ttl = redis.call('PTTL', KEYS[1])
	if ttl > 0 then
		redis.call('SET', KEYS[1], 'c:' .. owner .. list, 'PX', ttl)
	end
	return 0
end
redis.call('SET', KEYS[1], 'r:' .. list, 'PX', ARGV[2])
if owner then
	return 1
end
return 0
`)

// extendScript sets the expiry of KEYS[1] to ARGV[2] milliseconds from now if
// the token ARGV[1] holds its claim. It returns 1 if it did and 0 otherwise.
var extendScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v and string.match(v, '^c:(%S+)') == ARGV[1] then
	return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// Outcomes of forgetScript.
const (
	forgetAbsent = 0
	forgetDone   = 1
	forgetHeld   = 2
)

// forgetScript deletes KEYS[1] if it holds a mark, with its result or
// without, and returns forgetDone; it returns forgetHeld, changing nothing,
// for a claim (or any value it cannot tell, which Claim also takes for a
// claim held by someone else), and forgetAbsent for no value or released
// tokens, whose fences it keeps. Redis expires a key on access, so a value
// found is live. One key: the script runs on any node of a cluster.
var forgetScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 2) == 'r:' then
	return 0
end
if v == 'm' or string.sub(v, 1, 2) == 'm:' then
	redis.call('DEL', KEYS[1])
	return 1
end
return 2
`)
