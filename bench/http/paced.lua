-- Paces each connection: a request every PACE_MS milliseconds at most, for a load below the peak.
local pace = tonumber(os.getenv("PACE_MS") or "1")
function delay()
  return pace
end
