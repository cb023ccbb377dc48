-- Sluice: one decision on one key, every limit of the key at once, atomically (docs/algorithms.md).
--
-- KEYS[1]  sluice:{<key>}: the state of every limit of the key, one string
-- ARGV     now_ms now_ns (empty: the server's TIME), cost, mode, max_delay_ns (shaping: -1 for none),
--          ttl_margin_ms, limit count,
--          then for each limit its algorithm (1 fixed-window, 2 sliding-log, 3 sliding-window, 4 gcra and
--          greedy token-bucket and leaky-bucket, 5 token-bucket with interval refill), amount, period_ms, burst
-- returns  'allowed(0|1) remaining retry_after_ns reset_after_ns delay_ns deciding_limit(0-based)
--          deciding_limit_reset_after_ns', one string:
--          a table reply costs Redis several times what a string does (it builds the reply's length after
--          its elements, in a buffer of its own), and that was the largest single cost of a decision
--
-- Exact arithmetic with doubles. Lua's numbers are doubles: integers are exact up to 2^53 and no further.
-- A time since the epoch in nanoseconds (1.8e18) is past that, so a time is a pair: whole milliseconds
-- (1.8e12) and the nanoseconds beyond them (< 10^6). Every other quantity is a duration or a count, and the
-- Redis store refuses limits that could take one past 2^53 (RedisStore.check): a period under 2^53 ns (104.2 days),
-- L·P(ms), B·L and B·P/L(ns) under 2^53. Products that could still pass it (prev·(P − e) of the sliding
-- window, k·T of gcra's remaining) are split in milliseconds and nanoseconds and carried by hand. Every
-- division is a floor division corrected by its remainder, so no rounding of a quotient can leak out. Two
-- times are compared by whole periods, not by their difference in nanoseconds, which passes 2^53 once they
-- are 104.2 days apart: a state can last longer than that (a sliding log of a 100-day period keeps entries
-- until 100 days have passed, an interval bucket in debt fills up B·P/L plus the delay later).

local NS = 1000000        -- nanoseconds in a millisecond
local SPLIT = 9007199254  -- floor(2^53 / 10^6): any x up to it has x·10^6 exact
local NEVER = -1

local function divmod(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then q = q - 1; r = r + b elseif r >= b then q = q + 1; r = r - b end
  return q, r
end

local function ceildiv(a, b)
  local q, r = divmod(a, b)
  if r > 0 then q = q + 1 end
  return q
end

-- times: {ms, ns}
local function diff(a, b) return (a[1] - b[1]) * NS + (a[2] - b[2]) end
-- the whole periods P from b to a (a at or after b), however far apart: a − b = q·P(ms)·10^6 + the rest,
-- and the rest, r·10^6 + (a's ns − b's ns) with r < P(ms), lies in (−10^6, P), all exact
local function periods(l, a, b)
  local q, r = divmod(a[1] - b[1], l[2])
  if r * NS + (a[2] - b[2]) < 0 then q = q - 1 end
  return q
end
-- the latest time a state of Sluice's holds, in ms: 2^62 ns (the latest time decided) and 2^53 ns more (a TAT, a
-- refill ahead of it). A later one is another program's: the waits from it would pass what a Java long holds
local LATEST_MS = 4620693217682
-- a number Sluice could have written as a time: whole, at least 0, below 2^53 (not NaN, not inf)
local function whole(x)
  return x ~= nil and x == x and x >= 0 and x < 9007199254740992 and x % 1 == 0
end
local function cmp(a, b)
  if a[1] ~= b[1] then return a[1] < b[1] and -1 or 1 end
  if a[2] ~= b[2] then return a[2] < b[2] and -1 or 1 end
  return 0
end
local function plus(a, d)
  -- d split first: a time's nanoseconds plus a period of nearly 2^53 ns passed 2^53 and rounded (a review found an
  -- interval refill's next refill stored 1 ns late, and a request at it rejected)
  local dq, dr = divmod(d, NS)
  local q, r = divmod(a[2] + dr, NS)
  return {a[1] + dq + q, r}
end

local function num(x) return string.format('%.0f', x) end

-- only the algorithms this call uses are defined: a script's body runs whole on every call, and making
-- the closures of all five would cost more than some decisions do
local count = tonumber(ARGV[7])
local uses = {}
for i = 1, count do uses[tonumber(ARGV[4 + 4 * i])] = true end

-- a limit: {L, Pms, B, Pns}; a state: a table, or nil when untouched. Each algorithm has
-- advance(l, s, t), wait(l, s, t, c), take(l, s, t, c), remaining(l, s, t), reset(l, s, t), and
-- load/save of its fields.

local function window_end(l, t)
  local w = divmod(t[1], l[2])
  return diff({(w + 1) * l[2], 0}, t), w
end

local fixed
if uses[1] then
fixed = {}
function fixed.advance(l, s, t)
  if s == nil then return nil end
  local w = divmod(t[1], l[2])
  if s.w ~= w then return nil end
  return s
end
function fixed.wait(l, s, t, c)
  if c > l[1] then return NEVER end
  local n = s and s.n or 0
  if n + c <= l[1] then return 0 end
  return (window_end(l, t))
end
function fixed.take(l, s, t, c)
  local _, w = window_end(l, t)
  return {w = w, n = (s and s.n or 0) + c}
end
function fixed.remaining(l, s, t) return math.max(0, l[1] - (s and s.n or 0)) end
function fixed.reset(l, s, t)
  if s == nil then return 0 end
  return (window_end(l, t))
end
function fixed.load(f, i, l)
  local w, n = tonumber(f[i]), tonumber(f[i + 1])
  if w == nil or n == nil or n < 0 then return nil, 0 end
  return {w = w, n = n}, i + 2
end
function fixed.save(s) return num(s.w) .. ' ' .. num(s.n) end
end

local sliding
if uses[3] then
sliding = {}
function sliding.advance(l, s, t)
  if s == nil then return nil end
  local w = divmod(t[1], l[2])
  if s.w == w then return s end
  if s.w == w - 1 and s.curr > 0 then return {w = w, prev = s.curr, curr = 0} end
  return nil
end
-- prev·to_end against k·P, both in ns, with to_end = a ms + b ns: prev·a + floor(prev·b / 10^6) is the
-- whole-millisecond part of prev·to_end, and it stays under 2^53 because L·P(ms) does. prev·b itself can
-- pass 2^53 (prev up to L, b up to 10^6 − 1), so prev is split too: prev = p1·10^6 + p0, and
-- prev·b = p1·b·10^6 + p0·b, with p1·b < prev and p0·b < 10^12.
local function weighted(prev, to_end)
  local a, b = divmod(to_end, NS)
  local p1, p0 = divmod(prev, NS)
  local hi, lo = divmod(p0 * b, NS)
  return prev * a + p1 * b + hi, lo   -- prev·to_end = (first)·10^6 + second
end
-- floor(r·10^6 / y) for 0 <= r < y: at once while r·10^6 is exact, else by long division in base 2 over the
-- bits of 10^6, with the remainder kept below y (a sum that would reach y is taken as a difference from it)
local function millionths(r, y)
  if r <= SPLIT then return (divmod(r * NS, y)) end
  local q, rem, rest, bit = 0, 0, NS, 524288   -- 2^19: 10^6 has 20 bits
  while bit >= 1 do
    q = q * 2
    if rem >= y - rem then rem = rem - (y - rem); q = q + 1 else rem = rem + rem end
    if rest >= bit then
      rest = rest - bit
      if rem >= y - r then rem = rem - (y - r); q = q + 1 else rem = rem + r end
    end
    bit = bit / 2
  end
  return q
end
-- floor(x·P(ns) / y), for a result known to be below 2^53: x·P(ms) = q·y + r, then the 10^6 by hand
local function scaled(l, x, y)
  local q, r = divmod(x * l[2], y)
  return q * NS + millionths(r, y)
end
function sliding.wait(l, s, t, c)
  if c > l[1] then return NEVER end
  local prev = s and s.prev or 0
  local curr = s and s.curr or 0
  local to_end = window_end(l, t)
  local k = l[1] - curr - c
  if k >= 0 then
    if prev == 0 then return 0 end
    local ms, ns = weighted(prev, to_end)
    local bound = k * l[2]
    if ms < bound or (ms == bound and ns == 0) then return 0 end
    -- prev·(to_end − d) <= k·P: d = to_end − floor(k·P / prev), and k·P/prev < to_end here
    return to_end - scaled(l, k, prev)
  end
  -- the next window, where curr becomes the weighted count
  local spare = l[1] - c
  local later = 0
  if spare < curr then later = l[4] - scaled(l, spare, curr) end
  return to_end + later
end
function sliding.take(l, s, t, c)
  local _, w = window_end(l, t)
  if s == nil then return {w = w, prev = 0, curr = c} end
  return {w = s.w, prev = s.prev, curr = s.curr + c}
end
function sliding.remaining(l, s, t)
  if s == nil then return l[1] end
  local ms, ns = weighted(s.prev, (window_end(l, t)))
  -- ceil(prev·to_end / P) with prev·to_end = ms·10^6 + ns and P = P(ms)·10^6
  local q, r = divmod(ms, l[2])
  if r > 0 or ns > 0 then q = q + 1 end
  return math.max(0, l[1] - s.curr - q)
end
function sliding.reset(l, s, t)
  if s == nil then return 0 end
  local to_end = window_end(l, t)
  if s.curr > 0 then return to_end + l[4] end
  return to_end
end
function sliding.load(f, i, l)
  local w, prev, curr = tonumber(f[i]), tonumber(f[i + 1]), tonumber(f[i + 2])
  if w == nil or prev == nil or curr == nil or prev < 0 or curr < 0 then return nil, 0 end
  return {w = w, prev = prev, curr = curr}, i + 3
end
function sliding.save(s) return num(s.w) .. ' ' .. num(s.prev) .. ' ' .. num(s.curr) end
end

-- sliding-log: entries {ms, ns, cost}, oldest first, distinct times
local log
if uses[2] then
-- The log is kept as text, "n u<used> ms ns c ms ns c ...": its entries oldest first, each a time {ms, ns} and
-- the cost taken then, and before them their count and the sum of their costs. A decision reads only what it
-- needs of it: the entries that expire (from the front), the last (from the back, for a merge and reset_after),
-- and, only to say how long a rejection waits, as many entries as must expire for the cost to fit. The text
-- between is copied whole when the state is written, never parsed: parsing and writing each entry as numbers
-- made a decision cost 1.4 µs an entry (about 0.4 ms at 300 entries), so that a burst of a few hundred calls on
-- one key outlasted the 50 ms timeout and was decided by the failure policy (found by a review).
-- A state: {text, pos: where its first entry kept starts, stop: where the text kept ends, n, used,
-- last: {ms, ns, c}, written after the text kept; last_at: where the last entry starts in text}.
log = {}
local ENTRY = '^(%d+) (%d+) (%d+)()'
-- nil where the text holds no entry: a log that says it has more than it has, or a time no clock reaches (another
-- program's value)
local function entry_at(s, at)
  local ms, ns, c, after = string.match(s.text, ENTRY, at)
  if ms == nil or tonumber(ms) > LATEST_MS then return nil end
  return {tonumber(ms), tonumber(ns), tonumber(c)}, after + 1
end
function log.parse(section)
  local n, used, at = string.match(section, '^(%d+) u(%d+) ?()')
  local s = {text = section}
  if n == nil then
    -- the text of Sluice before the count of costs ("n ms ns c ..."), until such keys expire: summed once
    n, at = string.match(section, '^(%d+) ?()')
    if n == nil then return nil end -- no log's: read as untouched (see below)
    used = 0
    local entries = 0
    for c in string.gmatch(string.sub(section, at), '%d+ %d+ (%d+)') do
      used = used + tonumber(c)
      entries = entries + 1
    end
    if entries ~= tonumber(n) then return nil end
  end
  s.n, s.used, s.pos, s.stop = tonumber(n), tonumber(used), at, #section
  if s.n == 0 then return nil end
  -- the last entry: the one that a space and exactly three numbers end the text with, looked for near its end
  -- (an entry is at most 13 + 6 + 5 digits and two spaces: a cost is at most the limit, 10,000)
  local from = math.max(1, #section - 48)
  local at_last, ms, ns, c = string.match(section, ' ()(%d+) (%d+) (%d+)$', from)
  -- none: the state of another algorithm (a limiter whose rule changed at a deploy, its keys still here), read as
  -- untouched rather than decided as garbage or failed (a review found such a key failing every call until it expired)
  if at_last == nil or tonumber(ms) > LATEST_MS then return nil end
  s.last, s.last_at = {tonumber(ms), tonumber(ns), tonumber(c)}, at_last
  return s
end
function log.advance(l, s, t)
  if s == nil then return nil end
  while s.n > 0 do
    local e, after = entry_at(s, s.pos)
    if e == nil then return nil end -- not a log Sluice wrote: read as untouched, as parse reads one
    if periods(l, t, e) < 1 then break end
    s.used = s.used - e[3]
    s.n = s.n - 1
    s.pos = after
  end
  if s.n == 0 then return nil end
  return s
end
function log.wait(l, s, t, c)
  if c > l[1] then return NEVER end
  local used = s and s.used or 0
  if used + c <= l[1] then return 0 end
  local at = s.pos
  while true do
    local e, after = entry_at(s, at)
    if e == nil then return l[4] - diff(t, s.last) end -- not Sluice's: all of it gone once its last entry is
    used = used - e[3]
    if used + c <= l[1] then return l[4] - diff(t, e) end
    at = after
  end
end
function log.take(l, s, t, c)
  if s == nil then
    s = {n = 0, used = 0, pos = 1, stop = 0, text = ''}
  end
  local last = s.last
  if last ~= nil and last[1] == t[1] and last[2] == t[2] then
    -- the same time as the last entry: one entry of both costs, written in its place
    s.last = {t[1], t[2], last[3] + c}
    s.stop = s.last_at - 2
  else
    s.last = {t[1], t[2], c}
    s.n = s.n + 1
  end
  s.used = s.used + c
  return s
end
function log.remaining(l, s, t) return math.max(0, l[1] - (s and s.used or 0)) end
function log.reset(l, s, t)
  if s == nil then return 0 end
  return l[4] - diff(t, s.last)
end
function log.save(s)
  local head = num(s.n) .. ' u' .. num(s.used)
  local kept = s.pos <= s.stop and string.sub(s.text, s.pos, s.stop) or nil
  local last = num(s.last[1]) .. ' ' .. num(s.last[2]) .. ' ' .. num(s.last[3])
  if kept then return head .. ' ' .. kept .. ' ' .. last end
  return head .. ' ' .. last
end
end

-- gcra, greedy token-bucket, leaky-bucket: the theoretical arrival time {ms, ns} plus frac/L
local gcra
if uses[4] then
gcra = {}
local function step(l, c)
  if c == 1 then return l.tq, l.tr end
  local hi, fr = divmod(c * l.tr, l[1])
  return c * l.tq + hi, fr
end
local function after(s, t)
  local order = cmp(s.tat, t)
  return order > 0 or (order == 0 and s.frac > 0)
end
function gcra.prepare(l)
  l.tq, l.tr = divmod(l[4], l[1])
  local hi, fr = divmod(l[3] * l.tr, l[1])
  l.dq, l.dr = l[3] * l.tq + hi, fr
end
function gcra.advance(l, s, t)
  if s == nil or not after(s, t) then return nil end
  return s
end
function gcra.wait(l, s, t, c)
  if c > l[3] then return NEVER end
  local sq, sr = step(l, c)
  local n = (s and diff(s.tat, t) or 0) - l.dq + sq
  local f = (s and s.frac or 0) - l.dr + sr
  if f >= l[1] then f = f - l[1]; n = n + 1 elseif f < 0 then f = f + l[1]; n = n - 1 end
  if n < 0 or (n == 0 and f == 0) then return 0 end
  if f > 0 then return n + 1 end
  return n
end
function gcra.take(l, s, t, c)
  local sq, sr = step(l, c)
  local tat = s and s.tat or t
  local f = (s and s.frac or 0) + sr
  if f >= l[1] then f = f - l[1]; sq = sq + 1 end
  return {tat = plus(tat, sq), frac = f}
end
function gcra.remaining(l, s, t)
  if s == nil then return l[3] end
  -- the largest k <= B with k·T <= B·T − (TAT − t) = xn + xf/L
  local xn = l.dq - diff(s.tat, t)
  local xf = l.dr - s.frac
  if xf < 0 then xf = xf + l[1]; xn = xn - 1 end
  if xn < 0 then return 0 end
  -- k·T = k·tq + (k·tr)/L: start from the double estimate, then step to the exact k (a step or two)
  local k = math.min(l[3], math.floor(xn * l[1] / l[4]))
  while k > 0 do
    local hi, fr = divmod(k * l.tr, l[1])
    local cn = k * l.tq + hi
    if cn < xn or (cn == xn and fr <= xf) then break end
    k = k - 1
  end
  while k < l[3] do
    local hi, fr = divmod((k + 1) * l.tr, l[1])
    local cn = (k + 1) * l.tq + hi
    if cn > xn or (cn == xn and fr > xf) then break end
    k = k + 1
  end
  return k
end
function gcra.reset(l, s, t)
  if s == nil then return 0 end
  local n = diff(s.tat, t)
  if s.frac > 0 then return n + 1 end
  return n
end
function gcra.load(f, i, l)
  local ms, ns, frac = tonumber(f[i]), tonumber(f[i + 1]), tonumber(f[i + 2])
  -- a fraction over another L (a limit changed at a deploy) is no TAT of this one: 0 <= frac < L
  if ms == nil or ns == nil or frac == nil or ns < 0 or ns >= NS or frac < 0 or frac >= l[1] or ms > LATEST_MS then
    return nil, 0
  end
  return {tat = {ms, ns}, frac = frac}, i + 3
end
function gcra.save(s) return num(s.tat[1]) .. ' ' .. num(s.tat[2]) .. ' ' .. num(s.frac) end
end

-- token-bucket with interval refill: tokens and the time of the next refill
local interval
if uses[5] then
interval = {}
local function refills_until(l, tokens, wanted) return ceildiv(wanted - tokens, l[1]) end
function interval.advance(l, s, t)
  if s == nil or cmp(t, s.next) < 0 then return s end
  local refills = periods(l, t, s.next) + 1
  if refills >= refills_until(l, s.tokens, l[3]) then return nil end
  return {next = plus(s.next, refills * l[4]), tokens = s.tokens + refills * l[1]}
end
function interval.wait(l, s, t, c)
  if c > l[3] then return NEVER end
  if s == nil or s.tokens >= c then return 0 end
  return diff(s.next, t) + (refills_until(l, s.tokens, c) - 1) * l[4]
end
-- a reservation (delay > 0) takes its cost from what the bucket holds at the start, capped at B like every refill:
-- min(tokens, B - k*L) - c for a start k refills ahead (IntervalBucket.java says why)
function interval.take(l, s, t, c, delay)
  local nxt, tokens
  if s == nil then nxt, tokens = plus(t, l[4]), l[3] else nxt, tokens = s.next, s.tokens end
  if delay > 0 then
    local start = plus(t, delay)
    if cmp(start, nxt) >= 0 then tokens = math.min(tokens, l[3] - (periods(l, start, nxt) + 1) * l[1]) end
  end
  return {next = nxt, tokens = tokens - c}
end
function interval.remaining(l, s, t)
  if s == nil then return l[3] end
  return math.max(0, s.tokens)
end
function interval.reset(l, s, t)
  if s == nil then return 0 end
  return diff(s.next, t) + (refills_until(l, s.tokens, l[3]) - 1) * l[4]
end
function interval.load(f, i, l)
  local ms, ns, tokens = tonumber(f[i]), tonumber(f[i + 1]), tonumber(f[i + 2])
  -- more tokens than the burst holds: a larger burst's, before a deploy (a gcra's state, of the same three numbers,
  -- may still pass for one: only a namespace of its own keeps a new rule clear of an old one's keys)
  if ms == nil or ns == nil or tokens == nil or ns < 0 or ns >= NS or tokens > l[3] or ms > LATEST_MS then
    return nil, 0
  end
  return {next = {ms, ns}, tokens = tokens}, i + 3
end
function interval.save(s) return num(s.next[1]) .. ' ' .. num(s.next[2]) .. ' ' .. num(s.tokens) end
end

-- the decision ------------------------------------------------------------------------------------

local ALGORITHMS = {fixed, log, sliding, gcra, interval}
local REJECT, DELAY, SHAPING = 0, 1, 2

local now
if ARGV[1] == '' then
  local time = redis.call('TIME')
  local usec = tonumber(time[2])
  now = {tonumber(time[1]) * 1000 + math.floor(usec / 1000), (usec % 1000) * 1000}
else
  now = {tonumber(ARGV[1]), tonumber(ARGV[2])}
end
local cost = tonumber(ARGV[3])
local mode = tonumber(ARGV[4])
local max_delay = tonumber(ARGV[5])
local ttl_margin = tonumber(ARGV[6])
local limits = {}
for i = 1, count do
  local at = 4 + 4 * i
  local l = {tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])}
  l[4] = l[2] * NS
  l.alg = ALGORITHMS[tonumber(ARGV[at])]
  if l.alg.prepare then l.alg.prepare(l) end
  limits[i] = l
end

-- the stored value: "time_ms time_ns|fields of limit 1|fields of limit 2..." ("" for an untouched limit)
-- a value Sluice did not write under the key (another program's, of another type, a clock that is not two whole
-- numbers) is read as untouched, and written over if the request is admitted: it failed every call on the key (a
-- review of the scripts found it)
local stored = redis.pcall('GET', KEYS[1])
if type(stored) ~= 'string' or (string.byte(stored, 1) == 103 and #stored ~= 41) then stored = false end
if stored and string.byte(stored, 1) == 103 then
  -- gcra.lua's binary state ('g', then five doubles: the key's clock, one gcra limit's TAT and fraction), read
  -- as the text it stands for: a policy edited from one gcra limit to several still finds its keys
  local cm, cn, am, an, af = struct.unpack('<ddddd', stored, 2)
  stored = num(cm) .. ' ' .. num(cn) .. '|' .. num(am) .. ' ' .. num(an) .. ' ' .. num(af)
end
local t = now
local states = {}
if stored then
  local sections = {}
  for section in string.gmatch(stored .. '|', '([^|]*)|') do sections[#sections + 1] = section end
  local clock = {}
  for word in string.gmatch(sections[1], '%S+') do clock[#clock + 1] = tonumber(word) end
  if not (whole(clock[1]) and whole(clock[2]) and clock[2] < NS and clock[1] <= LATEST_MS) then
    sections, clock = {}, {0, 0}
  end
  if cmp({clock[1], clock[2]}, now) > 0 then t = {clock[1], clock[2]} end
  for i = 1, count do
    local section = sections[i + 1] or ''
    if limits[i].alg.parse then
      -- read as text, only what the decision needs (the sliding log)
      if section ~= '' then states[i] = limits[i].alg.parse(section) end
    else
      local fields = {}
      -- Sluice writes whole numbers of at most 16 digits (num, below 2^53): 'nan', 'inf', '1e3', 10^20 are another
      -- program's (two searches of the section, not one a word: a decision's cost is mostly such calls); a time
      -- past LATEST_MS is refused as each algorithm loads it
      if not string.find(section, '[^%d %-]') and not string.find(section, '%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d%d') then
        for word in string.gmatch(section, '%S+') do fields[#fields + 1] = word end
      end
      if #fields > 0 then
        local loaded, after = limits[i].alg.load(fields, 1, limits[i])
        -- a state of another rule (a limiter whose rule changed at a deploy, its keys still here) is read as
        -- untouched where it cannot be this one's (not its count of numbers, or out of its ranges), not failed (a
        -- review found a fixed window's state failing every call of a gcra, a sliding window's, a sliding log's,
        -- until it expired)
        if after == #fields + 1 then states[i] = loaded end
      end
    end
  end
end

local untouched = true
for i = 1, count do
  states[i] = limits[i].alg.advance(limits[i], states[i], t)
  if states[i] ~= nil then untouched = false end
end

local function answer(allowed, retry, delay, decider)
  local remaining, least, reset, resets = nil, 0, 0, {}
  for i = 1, count do
    local left = limits[i].alg.remaining(limits[i], states[i], t)
    if remaining == nil or left < remaining then remaining = left; least = i end
    resets[i] = limits[i].alg.reset(limits[i], states[i], t)
    reset = math.max(reset, resets[i])
  end
  if decider == nil then decider = least end
  return string.format('%d %.0f %.0f %.0f %.0f %d %.0f', allowed and 1 or 0, remaining, retry, reset, delay,
    decider - 1, resets[decider]), reset
end

-- a key back to untouched is dropped, its clock with it, as the in-memory store drops it: nothing observable
-- changes, and the next request finds it fresh
local function forget_if_untouched()
  if stored and untouched then redis.call('DEL', KEYS[1]) end
end

if cost == 0 then forget_if_untouched(); return (answer(true, 0, 0, nil)) end

local wait, waiting = 0, nil
for i = 1, count do
  local w = limits[i].alg.wait(limits[i], states[i], t, cost)
  if w == NEVER then wait = NEVER; waiting = i; break end
  if w > wait then wait = w; waiting = i end
end
-- shaping: the delay the queue ahead gives; with a max delay it must be within it too, and is after
-- held - max_delay (the queue drains as time passes), as Rule.decide says
local held = 0
if mode == SHAPING then
  for i = 1, count do held = math.max(held, limits[i].alg.reset(limits[i], states[i], t)) end
end
local fits = (wait == 0 and (mode ~= SHAPING or max_delay < 0 or held <= max_delay))
  or (mode == DELAY and wait ~= NEVER and wait <= max_delay)
if not fits then
  local retry = wait
  if wait ~= NEVER and mode == DELAY then retry = wait - max_delay end
  if wait ~= NEVER and mode == SHAPING and max_delay >= 0 then
    retry = math.max(wait, held - max_delay)
    -- the deciding limit: the first whose own wait, max(wait, reset - max_delay), is the longest (Rule.longestToHold)
    local longest = -1
    for i = 1, count do
      local w = math.max(limits[i].alg.wait(limits[i], states[i], t, cost),
        limits[i].alg.reset(limits[i], states[i], t) - max_delay)
      if w > longest then longest = w; waiting = i end
    end
  end
  forget_if_untouched()
  return (answer(false, retry, 0, waiting))
end

local delay = held
if mode == DELAY then delay = wait end
local sections = {num(t[1]) .. ' ' .. num(t[2])}
for i = 1, count do
  states[i] = limits[i].alg.take(limits[i], states[i], t, cost, mode == DELAY and delay or 0)
  sections[i + 1] = limits[i].alg.save(states[i])
end
local result, reset = answer(true, 0, delay, nil)
-- the expiry counts from now, not from t: a key's clock ahead of the server's (its clock stepped back, a
-- replica promoted behind its master) would otherwise expire that much early and lose the state it holds
local ahead = t[1] - now[1]
if t[2] > now[2] then ahead = ahead + 1 end
redis.call('SET', KEYS[1], table.concat(sections, '|'), 'PX', ceildiv(reset, NS) + ttl_margin + ahead)
return result
