-- Sluice: decisions on keys with one gcra limit (gcra, greedy token-bucket, leaky-bucket): decide.lua's gcra,
-- decision for decision, without its tables and closures. decide.lua builds a table per time, per limit
-- and per state, and a closure per algorithm; for the most common rule those cost Redis more than the
-- arithmetic. Here a time is two locals (whole milliseconds, nanoseconds beyond them) and the limit's constants
-- come worked out from Java.
--
-- The stored state is binary: the byte 'g', then five little-endian doubles (struct.pack '<Bddddd'): the key's
-- clock (ms, ns) and its TAT (ms, ns, and the fraction af/L). Lua 5.1 turns every number into text through
-- sprintf, and the ten numbers of a text state and its parsing were a third of a decision's cost in Redis
-- (measured: bench/README.md); packed, a call of 8 decisions ran about 40% more often under redis-benchmark,
-- and a key takes the same memory (41 bytes of value, as the text took about as many). Doubles hold every value
-- exactly (each below 2^53, see below). The text state of
-- decide.lua ("time_ms time_ns|tat_ms tat_ns frac", and what Sluice wrote before) is still read, so keys
-- written by an earlier version are decided on; decide.lua reads the binary state too (a policy edited from one
-- gcra limit to several keeps its keys). An earlier Sluice cannot read it: upgrade every process together.
--
-- One call decides one key or several, one after the other in the order given, exactly as that many calls
-- in a row would (a key given twice sees its first decision). Decisions waiting on one connection for the
-- same rule are sent together: what a call costs Redis beyond its decisions (the call itself, the rule's
-- constants, TIME) is paid once for all of them. In a Cluster a call carries one key.
--
-- KEYS     sluice:{<key>} for each decision
-- ARGV     mode (0 reject, 1 delay, 2 shaping), max_delay_ns (shaping: -1 for none), ttl_margin_ms (for
--          decisions at a time passed in), L, B, P (ns), T = P/L as tq + tr/L, B·T as dq + dr/L; then one argument for each key: its cost
--          (decided at the server's TIME, read once a call), or 'cost now_ms now_ns' (at a time passed in)
-- returns  for each key 33 bytes, struct.pack '<Bdddd': allowed (the byte 0 or 1), then remaining,
--          retry_after_ns, reset_after_ns and delay_ns as little-endian doubles (whole numbers below 2^53, so
--          exact); the keys' answers one after the other in one string. decide.lua answers the same fields as
--          text ('allowed remaining retry reset delay limit'); here the limit is the one there is. Binary for
--          the reason the state is: four numbers made text through sprintf cost a call of 8 keys about a fifth
--          of its time (redis-benchmark, the same server, text and binary alternating: 26,300-26,600 against
--          30,700-33,400 calls a second; one key a call 80,000-91,000 against 96,000-105,000).
--
-- Exactness is decide.lua's (see there): every quantity below 2^53, divisions corrected by their remainder.
--
-- What a decision costs Redis beyond its arithmetic was cut where redis-benchmark showed it (calls of 8 keys, the
-- same server, alternating; bench/README.md, twentieth session): one argument a decision instead of three (each
-- is an object to parse and a string to intern), about 7% more calls a second; PSETEX instead of SET ... PX (no
-- options to compare) with its milliseconds made text by '%d' rather than by Redis's '%.17g', 3%; the functions
-- used per decision held in locals rather than looked up as globals, 2%. Together, every decision admitted:
-- 27,400-28,400 calls a second before, 29,800-31,500 after; at 100/1s, mostly rejections: 31,500-33,600 before,
-- 36,300-37,700 after. A call of one key is as fast as before (its cost is the call's, not the decision's).

local call, pack, unpack, floor, min, byte, format = redis.call, struct.pack, struct.unpack, math.floor, math.min,
  string.byte, string.format
local NS = 1000000
local NEVER = -1
local BINARY = 103 -- 'g': a binary state (above)
local mode, max_delay, margin = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local L, B, P = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local tq, tr, dq, dr = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])

local function divmod(a, b)
  local q = floor(a / b)
  local r = a - q * b
  if r < 0 then q = q - 1; r = r + b elseif r >= b then q = q + 1; r = r - b end
  return q, r
end

-- the state of the key being decided: t = (tm, tn), the later of now and the key's clock; its TAT (am, an)
-- plus af/L, or untouched (am == nil)
local tm, tn, am, an, af

-- the step of a cost c: c·T = sq + sr/L
local function step(c)
  if c == 1 then return tq, tr end
  local hi, fr = divmod(c * tr, L)
  return c * tq + hi, fr
end

local function remaining()
  if am == nil then return B end
  -- the largest k <= B with k·T <= B·T − (TAT − t) = xn + xf/L
  local xn = dq - ((am - tm) * NS + (an - tn))
  local xf = dr - af
  if xf < 0 then xf = xf + L; xn = xn - 1 end
  if xn < 0 then return 0 end
  local k = min(B, floor(xn * L / P))
  while k > 0 do
    local hi, fr = divmod(k * tr, L)
    local cn = k * tq + hi
    if cn < xn or (cn == xn and fr <= xf) then break end
    k = k - 1
  end
  while k < B do
    local hi, fr = divmod((k + 1) * tr, L)
    local cn = (k + 1) * tq + hi
    if cn > xn or (cn == xn and fr > xf) then break end
    k = k + 1
  end
  return k
end

local function reset()
  if am == nil then return 0 end
  local n = (am - tm) * NS + (an - tn)
  if af > 0 then return n + 1 end
  return n
end

-- the latest time a state of Sluice's holds, in ms: 2^62 ns (the latest time decided) and 2^53 ns more (a TAT ahead
-- of it). A later one is another program's: the waits from it would pass what a Java long holds
local LATEST_MS = 4620693217682
-- a number Sluice could have written in a state: whole, at least 0, below 2^53 (not NaN, not inf)
local function whole(x)
  return x ~= nil and x == x and x >= 0 and x < 9007199254740992 and x % 1 == 0
end

local function answer(allowed, retry, delay)
  return pack('<Bdddd', allowed and 1 or 0, remaining(), retry, reset(), delay)
end

local function decide(key, nm, nn, cost, ttl_margin)
  -- a value Sluice did not write under the key (another program's, of another type) is read as untouched, and
  -- written over if the request is admitted: it failed the call, and with it every other key of the batch, some
  -- of them already charged (a review of the scripts found it)
  local stored = redis.pcall('GET', key)
  if type(stored) ~= 'string' then stored = nil end
  tm, tn, am = nm, nn, nil
  if stored then
    local cm, cn, a, b, c
    if byte(stored, 1) == BINARY then
      if #stored == 41 then cm, cn, a, b, c = unpack('<ddddd', stored, 2) end
    else
      local rest
      cm, cn, rest = string.match(stored, '^([^ |]+) ([^ |]+)|?(.*)$')
      cm, cn = tonumber(cm), tonumber(cn)
      -- decide.lua's first limit, if it is three numbers, a gcra's: anything else (another algorithm's state, of a
      -- limiter whose rule changed at a deploy) is read as untouched, not failed
      if rest then
        a, b, c = string.match(rest, '^(%d+) (%d+) (%d+)|')
        if a == nil then a, b, c = string.match(rest, '^(%d+) (%d+) (%d+)$') end
        a, b, c = tonumber(a), tonumber(b), tonumber(c)
      end
    end
    if not (whole(cm) and whole(cn) and cn < NS and cm <= LATEST_MS) then cm, cn, a = 0, 0, nil end
    if a and not (whole(a) and whole(b) and whole(c) and a <= LATEST_MS) then a = nil end
    if cm > nm or (cm == nm and cn > nn) then tm, tn = cm, cn end
    -- a fraction over another L (a limit changed at a deploy), or a nanosecond part that is none (another algorithm's
    -- state): no TAT of this rule, so untouched, as decide.lua reads it
    if a and (c >= L or b >= NS) then a = nil end
    if a then
      am, an, af = a, b, c
      -- a TAT not after t leaves the key untouched
      if am < tm or (am == tm and (an < tn or (an == tn and af == 0))) then am = nil end
    end
  end
  -- a key back to untouched is dropped, as decide.lua and the in-memory store drop it
  local untouched = stored and am == nil

  if cost == 0 then
    if untouched then call('DEL', key) end
    return answer(true, 0, 0)
  end

  local wait = NEVER
  if cost <= B then
    local sq, sr = step(cost)
    local n = (am and ((am - tm) * NS + (an - tn)) or 0) - dq + sq
    local f = (am and af or 0) - dr + sr
    if f >= L then f = f - L; n = n + 1 elseif f < 0 then f = f + L; n = n - 1 end
    if n < 0 or (n == 0 and f == 0) then wait = 0 elseif f > 0 then wait = n + 1 else wait = n end
  end
  -- shaping: held, the queue's delay, must be within a max delay too (decide.lua says why retry is so)
  local held = 0
  if mode == 2 then held = reset() end
  if not ((wait == 0 and (mode ~= 2 or max_delay < 0 or held <= max_delay))
      or (mode == 1 and wait ~= NEVER and wait <= max_delay)) then
    local retry = wait
    if wait ~= NEVER and mode == 1 then retry = wait - max_delay end
    if wait ~= NEVER and mode == 2 and max_delay >= 0 and held - max_delay > wait then retry = held - max_delay end
    if untouched then call('DEL', key) end
    return answer(false, retry, 0)
  end

  local delay = held
  if mode == 1 then delay = wait end
  local sq, sr = step(cost)
  local bm, bn = tm, tn
  if am then bm, bn = am, an end
  local f = (am and af or 0) + sr
  if f >= L then f = f - L; sq = sq + 1 end
  local q, r = divmod(bn + sq, NS)
  am, an, af = bm + q, r, f
  local result = answer(true, 0, delay)
  local ttl, part = divmod(reset(), NS)
  if part > 0 then ttl = ttl + 1 end
  -- '%d' formats a C long, 32 bits on some builds of Redis: above that, the number as Redis makes it text
  -- ('%.17g', exact for whole numbers below 2^53; a TTL is below 2^34 ms)
  -- counted from the server's now, not from t: a key's clock ahead of it (the server's clock stepped back, a
  -- replica promoted behind its master, decisions at times passed in) would expire that much early, and the
  -- state it still holds be lost
  local px = ttl + ttl_margin + (tm - nm)
  if tn > nn then px = px + 1 end
  call('PSETEX', key, px < 2147483648 and format('%d', px) or px, pack('<Bddddd', BINARY, tm, tn, am, an, af))
  return result
end

local answers = {}
local server_ms, server_ns
for i = 1, #KEYS do
  local argument = ARGV[10 + i]
  local cost = tonumber(argument)
  local nm, nn, ttl_margin
  if cost then
    if server_ms == nil then
      local time = call('TIME')
      local usec = tonumber(time[2])
      server_ms, server_ns = tonumber(time[1]) * 1000 + floor(usec / 1000), (usec % 1000) * 1000
    end
    nm, nn, ttl_margin = server_ms, server_ns, 0
  else
    local c, m, n = string.match(argument, '^(%d+) (%d+) (%d+)$')
    cost, nm, nn, ttl_margin = tonumber(c), tonumber(m), tonumber(n), margin
  end
  answers[i] = decide(KEYS[i], nm, nn, cost, ttl_margin)
end
if #answers == 1 then return answers[1] end
return table.concat(answers)
