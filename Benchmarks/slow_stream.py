"""Bytes to disk per message at a chat server's everyday rate: single posts (the 200-byte payload
of `make bench`, one recipient of 1,000 users) at RATE per second for SECONDS, one after the other
on one connection; the relay's whole life (start to exit, shutdown included) from its rusage.

    python3 Benchmarks/slow_stream.py BINARY [RATE SECONDS]     (default 200 10)

`make bench` measures bytes per message under `wrk -c64`, where thousands of messages share each
commit; this is the other end, where few do.
"""
import http.client, json, os, shutil, subprocess, sys, tempfile, time

BINARY = sys.argv[1]
RATE = float(sys.argv[2]) if len(sys.argv) > 2 else 200.0
SECONDS = float(sys.argv[3]) if len(sys.argv) > 3 else 10.0
PORT, KEY = 18377, "benchkey-0123456789"

directory = tempfile.mkdtemp(prefix="pushrelay-slow-")
relay = subprocess.Popen([BINARY, "serve", "--listen", f"127.0.0.1:{PORT}", "--db", f"{directory}/relay.sqlite",
                          "--server-keys", KEY, "--log-level", "warning"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(300):
        try:
            probe = http.client.HTTPConnection("127.0.0.1", PORT, timeout=1)
            probe.request("GET", "/readyz")
            if probe.getresponse().status == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    connection = http.client.HTTPConnection("127.0.0.1", PORT)
    headers = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}
    count = int(RATE * SECONDS)
    body_bytes = 0
    start = time.monotonic()
    for n in range(count):
        delay = start + n / RATE - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        body = json.dumps({"id": f"m{n}", "recipients": [f"u{n % 1000}"], "payload": {"text": "x" * 189}})
        body_bytes += len(body)
        connection.request("POST", "/v1/messages", body, headers)
        answer = connection.getresponse()
        answer.read()
        if answer.status != 202:
            sys.exit(f"POST answered {answer.status}")
    relay.terminate()
    _, status, usage = os.wait4(relay.pid, 0)
    if status != 0:
        sys.exit(f"the relay exited with status {status} (not measured whole)")
    written = usage.ru_oublock * 512
    print(f"{RATE:g} messages/s for {SECONDS:g} s: {written / count:,.0f} bytes to disk per message "
          f"({written / body_bytes:.1f}x the body), relay CPU {(usage.ru_utime + usage.ru_stime) / count * 1e6:.0f} us each")
finally:
    if relay.poll() is None:
        relay.kill()
    shutil.rmtree(directory, ignore_errors=True)
