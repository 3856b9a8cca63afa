-- wrk script: POST the benchmark payload to an nchan publisher location.
--
--   wrk -t2 -c64 -d10s -s Benchmarks/nchan_pub.lua http://127.0.0.1:18081/pub/bench
--
-- A static request (no request() function), so wrk builds it once and spends as little CPU as
-- possible on the client side: nginx gets its best number. The body is BENCH_PAYLOAD, the same
-- 200-byte object that post.lua sends to PushRelay as `payload`.

wrk.method = "POST"
wrk.body = os.getenv("BENCH_PAYLOAD") or ('{"text":"' .. string.rep("x", 189) .. '"}')
wrk.headers["Content-Type"] = "application/json"
