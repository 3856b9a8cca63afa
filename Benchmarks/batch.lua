-- wrk script: POST /v1/messages/batch, MESSAGES messages of RECIPIENTS recipients each per request
-- (unique ids), so that a request carries MESSAGES x RECIPIENTS recipient-messages.
--
--   wrk -t2 -c16 -d10s -s Benchmarks/batch.lua http://127.0.0.1:P/v1/messages/batch -- PREFIX MESSAGES RECIPIENTS KEY

local next_thread_id = 0

function setup(thread)
  next_thread_id = next_thread_id + 1
  thread:set("thread_id", next_thread_id)
end

function init(args)
  prefix = args[1] or ("b" .. os.time())
  messages = tonumber(args[2] or "100")
  recipients = tonumber(args[3] or "10")
  key = args[4] or "benchkey-0123456789"
  counter = 0
  local names = {}
  for r = 1, recipients do names[r] = '"u' .. r .. '"' end
  recipient_list = "[" .. table.concat(names, ",") .. "]"
end

function request()
  counter = counter + 1
  local items = {}
  for m = 1, messages do
    items[m] = string.format('{"id":"%s-%d-%d-%d","recipients":%s,"payload":{"text":"hello from the batch benchmark","n":%d}}',
      prefix, thread_id, counter, m, recipient_list, m)
  end
  local body = '{"messages":[' .. table.concat(items, ",") .. ']}'
  return wrk.format("POST", nil, {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. key}, body)
end
