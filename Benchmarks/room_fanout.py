"""A large room's live fan-out beside a bystander: 1,000 users online (one socket each); one
poster sends messages to all 1,000 at RATE per second while another posts single messages to a
user without sockets, for SECONDS. Prints the room posts' and the bystander's 202 latencies.

    .venv/bin/python Benchmarks/room_fanout.py BINARY [SECONDS RATE]     (default 10 5)

The Python client reading 5,000 frames/s shares the two cores: compare builds in one sitting,
interleaved, not against other figures.
"""
import asyncio, json, os, shutil, subprocess, sys, tempfile, time, urllib.request
import websockets
BIN = sys.argv[1]
SECS = float(sys.argv[2]) if len(sys.argv) > 2 else 10.0
RATE = float(sys.argv[3]) if len(sys.argv) > 3 else 5.0
PORT = 18395; KEY = 'benchkey-0123456789'; URL = f'http://127.0.0.1:{PORT}'
d = tempfile.mkdtemp()
p = subprocess.Popen([BIN, 'serve', '--listen', f'127.0.0.1:{PORT}', '--db', f'{d}/pr.sqlite', '--server-keys', KEY,
                      '--log-level', 'warning', '--max-connections-per-ip', '0', '--max-connections', '5000'],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
def req(method, path, body=None):
    r = urllib.request.Request(URL + path, method=method, data=json.dumps(body).encode() if body is not None else None,
                               headers={'Authorization': 'Bearer ' + KEY, 'Content-Type': 'application/json'})
    with urllib.request.urlopen(r) as resp: return resp.status, resp.read()
for _ in range(100):
    try:
        req('GET', '/readyz'); break
    except Exception: time.sleep(0.1)
users = [f'm{i}' for i in range(1000)]
async def main():
    loop = asyncio.get_running_loop()
    socks = []
    for u in users:
        _, body = await loop.run_in_executor(None, req, 'POST', '/v1/tokens', {'userId': u, 'deviceId': 'd'})
        tok = json.loads(body)['token']
        socks.append(await websockets.connect(f'ws://127.0.0.1:{PORT}/v1/ws?access_token={tok}', max_queue=None))
    received = [0]
    async def drain(ws):
        async for _ in ws: received[0] += 1
    tasks = [asyncio.create_task(drain(ws)) for ws in socks]
    await asyncio.sleep(1)
    lat_room, lat_single = [], []
    stop = time.time() + SECS
    def room():
        n = 0
        while time.time() < stop:
            t = time.perf_counter()
            req('POST', '/v1/messages', {'id': f'room{n}', 'recipients': users, 'payload': {'t': 'x' * 100}})
            lat_room.append(time.perf_counter() - t); n += 1
            time.sleep(max(0, 1 / RATE - (time.perf_counter() - t)))
    def single():
        n = 0
        while time.time() < stop:
            t = time.perf_counter()
            req('POST', '/v1/messages', {'id': f's{n}', 'recipients': ['offline'], 'payload': {'t': 'y'}})
            lat_single.append(time.perf_counter() - t); n += 1
            time.sleep(0.002)
    await asyncio.gather(loop.run_in_executor(None, room), loop.run_in_executor(None, single))
    await asyncio.sleep(2)
    def q(xs, f): xs = sorted(xs); return xs[min(len(xs) - 1, int(len(xs) * f))] * 1e3
    print(json.dumps({'bin': os.path.basename(BIN), 'room_posts': len(lat_room), 'room_p50': round(q(lat_room, .5), 2),
        'room_p99': round(q(lat_room, .99), 2), 'single_posts': len(lat_single), 'single_p50': round(q(lat_single, .5), 2),
        'single_p99': round(q(lat_single, .99), 2), 'frames': received[0]}))
    for t in tasks: t.cancel()
asyncio.run(main())
p.kill()
p.wait()
shutil.rmtree(d, ignore_errors=True)
