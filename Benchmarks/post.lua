-- wrk script: POST /v1/messages to PushRelay, one recipient, a unique `id` per request.
--
--   wrk -t2 -c64 -d10s -s Benchmarks/post.lua http://127.0.0.1:18080/v1/messages -- PREFIX [RECIPIENT] [KEY] [USERS] [OFFSET]
--
-- PREFIX makes the ids unique across wrk runs against the same database (a repeated id would be
-- an idempotent retry, answered 200 without a write). With USERS, the recipient rotates over
-- RECIPIENT1 ... RECIPIENT<USERS> (a chat server's traffic goes to many inboxes), starting OFFSET users on (two
-- wrk processes given different offsets do not post to the same user at the same moment). The payload object is taken from the
-- environment variable BENCH_PAYLOAD (run.sh sets it: the same 200-byte body nchan gets).

local next_thread_id = 0

-- Runs in the main Lua state, once per wrk thread: give each thread its own number.
function setup(thread)
  next_thread_id = next_thread_id + 1
  thread:set("thread_id", next_thread_id)
end

-- Runs in each thread's own Lua state.
function init(args)
  prefix = args[1] or ("r" .. os.time())
  recipient = args[2] or "bench"
  local key = args[3] or "benchkey-0123456789"
  payload = os.getenv("BENCH_PAYLOAD") or ('{"text":"' .. string.rep("x", 189) .. '"}')
  counter = 0
  wrk.method = "POST"
  wrk.headers["Authorization"] = "Bearer " .. key
  wrk.headers["Content-Type"] = "application/json"
  users = tonumber(args[4] or "0")
  offset = tonumber(args[5] or "0")
  head = '{"id":"' .. prefix .. "-" .. thread_id .. "-"
  tail = '"],"payload":' .. payload .. "}"
end

function request()
  counter = counter + 1
  local to = recipient
  if users > 0 then to = recipient .. ((counter * 7 + thread_id + offset) % users + 1) end
  return wrk.format(nil, nil, nil, head .. counter .. '","recipients":["' .. to .. tail)
end
