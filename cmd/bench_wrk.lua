-- The body of svc bench's wrk script; svc bench prepends the table `mix`
-- (cmd/bench.go's benchMix). Each request posts a fresh envelope of the
-- mix for one of `sessions` sessions, as the raw client does; responses
-- are tallied by verdict and done() prints one summary line.
-- Arguments (after `--`): the run's session prefix, the number of sessions.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

function init(args)
  run = args[1]
  sessions = tonumber(args[2])
  seq = 0
  allow, approval, deny, bad = 0, 0, 0, 0
  math.randomseed(id * 7919 + os.time())
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

local function pick()
  local roll = math.random(0, 99)
  for _, k in ipairs(mix) do
    if roll < k.share then return k end
    roll = roll - k.share
  end
  return mix[1]
end

function envelope(k, session, n, count)
  return '{"svc_version":"0.2","agent":{"id":"bench-' .. session .. '","on_behalf_of":"human:bench-' .. session ..
    '","session_id":"' .. session .. '"},"action":{"namespace":"db","verb":"' .. k.verb ..
    '","ability":"db/' .. k.verb .. '"},"target":{"kind":"table","ref":"bench.t' .. (n % 50) ..
    '","environment":"' .. k.environment .. '"},"params":{"seq":' .. n .. '},"magnitude":{"count":' .. count ..
    '},"axes":{"reversibility":"' .. k.reversibility .. '","blast_radius":"' .. k.blast ..
    '","externality":"' .. k.ext .. '"},"approval":{"present":false,"hold_id":null},"context":{},"meta":{' ..
    '"timestamp":"2026-01-01T00:00:00Z","nonce":"' .. session .. '-' .. n .. '","signature":"stub"}}'
end

function request()
  local k = pick()
  local session = run .. "-" .. math.random(0, sessions - 1)
  local body = envelope(k, session, seq, math.random(1, k.max))
  seq = seq + 1
  return wrk.format(nil, nil, nil, body)
end

-- A decision is a 200, or a 500 that still carries one (failed closed),
-- with a decision and a non-empty decision_id; anything else is an error.
function response(status, headers, body)
  local verdict = nil
  if (status == 200 or status == 500) and body:find('"decision_id":"[^"]') then
    verdict = body:match('"decision":"([%w_]+)"')
  end
  if verdict == "allow" then allow = allow + 1
  elseif verdict == "require_approval" then approval = approval + 1
  elseif verdict == "deny" then deny = deny + 1
  else bad = bad + 1 end
end

function done(summary, latency, requests)
  local t = {allow = 0, approval = 0, deny = 0, bad = 0}
  for _, thread in ipairs(threads) do
    for key, _ in pairs(t) do t[key] = t[key] + thread:get(key) end
  end
  local e = summary.errors
  io.write(string.format("svc-bench-wrk allow=%d approval=%d deny=%d errors=%d duration=%d p50=%d p90=%d p99=%d\n",
    t.allow, t.approval, t.deny, t.bad + e.connect + e.read + e.write + e.timeout, summary.duration,
    latency:percentile(50), latency:percentile(90), latency:percentile(99)))
end
