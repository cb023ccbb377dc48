-- Sluice: one decision on a key with one gcra limit (gcra, greedy token-bucket, leaky-bucket): decide.lua's
-- gcra, decision for decision, without its tables and closures. decide.lua builds a table per time, per limit
-- and per state, and a closure per algorithm; for the most common rule those cost Redis more than the
-- arithmetic. Here a time is two locals (whole milliseconds, nanoseconds beyond them), the limit's constants
-- come worked out from Java, and the state is read with one pattern. The stored value is decide.lua's
-- ("time_ms time_ns|tat_ms tat_ns frac"), so either script can decide a key the other wrote.
--
-- KEYS[1]  sluice:{<key>}
-- ARGV     now_ms now_ns (empty: the server's TIME), cost, mode (0 reject, 1 delay, 2 shaping),
--          max_delay_ns, ttl_margin_ms, then L, B, P (ns), T = P/L as tq + tr/L, and B·T as dq + dr/L
-- returns  'allowed(0|1) remaining retry_after_ns reset_after_ns delay_ns 0', one string, as decide.lua
--
-- Exactness is decide.lua's (see there): every quantity below 2^53, divisions corrected by their remainder.

local NS = 1000000
local NEVER = -1
local L, B, P = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local tq, tr, dq, dr = tonumber(ARGV[10]), tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])

local function divmod(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then q = q - 1; r = r + b elseif r >= b then q = q + 1; r = r - b end
  return q, r
end

local nm, nn
if ARGV[1] == '' then
  local time = redis.call('TIME')
  local usec = tonumber(time[2])
  nm, nn = tonumber(time[1]) * 1000 + math.floor(usec / 1000), (usec % 1000) * 1000
else
  nm, nn = tonumber(ARGV[1]), tonumber(ARGV[2])
end
local cost, mode, max_delay = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])

-- t: the later of now and the key's clock; the state: TAT (am, an) plus af/L, or untouched (am == nil)
local stored = redis.call('GET', KEYS[1])
local tm, tn = nm, nn
local am, an, af
if stored then
  local cm, cn, rest = string.match(stored, '^([^ |]+) ([^ |]+)|?(.*)$')
  cm, cn = tonumber(cm), tonumber(cn)
  if cm > nm or (cm == nm and cn > nn) then tm, tn = cm, cn end
  local a, b, c = string.match(rest, '^([^ |]+) ([^ |]+) ([^ |]+)')
  if a then
    am, an, af = tonumber(a), tonumber(b), tonumber(c)
    -- a TAT not after t leaves the key untouched
    if am < tm or (am == tm and (an < tn or (an == tn and af == 0))) then am = nil end
  end
end

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
  local k = math.min(B, math.floor(xn * L / P))
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

local function answer(allowed, retry, delay)
  return string.format('%d %.0f %.0f %.0f %.0f 0', allowed and 1 or 0, remaining(), retry, reset(), delay)
end

-- a key back to untouched is dropped, as decide.lua and the in-memory store drop it
local function forget_if_untouched()
  if stored and am == nil then redis.call('DEL', KEYS[1]) end
end

if cost == 0 then forget_if_untouched(); return answer(true, 0, 0) end

local wait = NEVER
if cost <= B then
  local sq, sr = step(cost)
  local n = (am and ((am - tm) * NS + (an - tn)) or 0) - dq + sq
  local f = (am and af or 0) - dr + sr
  if f >= L then f = f - L; n = n + 1 elseif f < 0 then f = f + L; n = n - 1 end
  if n < 0 or (n == 0 and f == 0) then wait = 0 elseif f > 0 then wait = n + 1 else wait = n end
end
if not (wait == 0 or (mode == 1 and wait ~= NEVER and wait <= max_delay)) then
  local retry = wait
  if wait ~= NEVER and mode == 1 then retry = wait - max_delay end
  forget_if_untouched()
  return answer(false, retry, 0)
end

local delay = 0
if mode == 1 then delay = wait elseif mode == 2 then delay = reset() end
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
redis.call('SET', KEYS[1], string.format('%.0f %.0f|%.0f %.0f %.0f', tm, tn, am, an, af),
  'PX', ttl + tonumber(ARGV[6]))
return result
