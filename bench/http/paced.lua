-- Paces each connection below the peak: after each answer it waits a random time, drawn from the exponential
-- distribution of mean PACE_US microseconds, before its next request. So requests arrive as a Poisson process
-- would, at a mean rate of connections / (PACE_US + latency), each connection on its own schedule.
--
-- Why random: with a fixed wait (this script before the ninth session) the 64 connections, started together,
-- stayed in step: every PACE_MS milliseconds all 64 sent at once (strace on the gateway's event loop: 25 requests
-- in one epoll_wait, then nothing), and the p99 measured the time the last request of such a burst queued behind
-- the other 63, not the latency a gateway adds at half load.
local pace_ms = tonumber(os.getenv("PACE_US") or "1000") / 1000

function init(args)
  -- a seed of its own per run: os.time alone would repeat the same schedule for runs started in the same second
  math.randomseed(os.time() * 1000 + (tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 1000))
end

-- wrk takes whole milliseconds: the wait is rounded up or down at random, so the mean stays PACE_US
function delay()
  local wait = -pace_ms * math.log(1 - math.random())
  return math.floor(wait + math.random())
end
