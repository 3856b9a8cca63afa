-- wrk script: Matrix Push Gateway notifies to PushRelay, a unique event per request, spread over
-- DEVICES registered pushkeys (`pk0` … `pkN-1`, app id `bench.app`).
--
--   wrk -t2 -c64 -d10s -s Benchmarks/matrix_notify.lua 'http://127.0.0.1:P/_matrix/push/v1/notify?secret=S' -- DEVICES

local next_thread_id = 0

function setup(thread)
  next_thread_id = next_thread_id + 1
  thread:set("thread_id", next_thread_id)
end

function init(args)
  devices = tonumber(args[1] or "1000")
  counter = 0
end

function request()
  counter = counter + 1
  local body = string.format(
    '{"notification":{"event_id":"$bench-%d-%d","room_id":"!bench:example.org","type":"m.room.message",' ..
    '"sender":"@bob:example.org","sender_display_name":"Bob","room_name":"Bench","prio":"high",' ..
    '"content":{"msgtype":"m.text","body":"hello"},"counts":{"unread":1},' ..
    '"devices":[{"app_id":"bench.app","pushkey":"pk%d","data":{}}]}}',
    thread_id, counter, counter % devices)
  return wrk.format("POST", nil, {["Content-Type"] = "application/json"}, body)
end
