#!/usr/bin/env python3
"""The JavaScript SDK in a real browser: headless Chromium (Debian `chromium`, `chromium-driver`)
driven by Selenium runs the web chat example (examples/web: its page, its service worker, the
SDK files of clients/js as its server hands them out) against the real relay binary, the page
on another origin than the relay.

    browser_peer.py BINARY

Origins: the relay on http://127.0.0.1:R; the page on http://localhost:P (listed in the relay's
corsAllowedOrigins and wsAllowedOrigins), on http://poll.localhost:P (CORS only: its WebSocket is
refused, so the SDK falls back to REST polling) and on http://127.0.0.1:P (listed nowhere).
Chromium counts localhost, *.localhost and 127.0.0.1 as secure contexts, as service workers need.

Checks: missed and live messages through CORS, on the socket and by REST polling; a relay
`kill -9` and restart with messages posted meanwhile (each once, in seq order); enterBackground()
makes the device offline and a push goes out; Web Push from enablePush() to a notification shown
and withdrawn by the service worker (the push service is the independent double of pushdoubles.py:
it checks VAPID and decrypts; Chromium cannot subscribe to a real push service here, so the page's
pushManager hands out the double's subscription and DevTools hands the decrypted push to the
worker); CORS refuses origins and routes it must. Each check starts its own page server, relay and
browser, and stops them. The last lines: the closing `N passed, M failed` and the time taken."""
import json
import os
import sys
import threading
import time
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "web"))
import serve  # noqa: E402  (the example's own server: page, SDK files, token and message endpoints)
from pushdoubles import WebPushEndpoint, b64url_decode, ca_file  # noqa: E402
from relaypeer import Receiver, Relay, registry, run_checks, wait_for  # noqa: E402
from webpush_peer import vapid_key  # noqa: E402

KEY = "browser-test-server-key"
checks, check = registry()


def browser():
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    return driver


def cors_origins(port):
    """What the relay lists in corsAllowedOrigins (the page's origin, and the polling one)."""
    return f"http://localhost:{port},http://poll.localhost:{port}"


RECORDER = """
window.seen = [];
Object.defineProperty(window, "chat", { configurable: true, get() { return this.recordedChat; }, set(chat) {
  chat.client.on("message", (m) => window.seen.push([m.seq, m.id, chat.client.state]));
  this.recordedChat = chat;
} });
"""


class Setup:
    """The example's page server, a relay that lets its origin in, and a browser; `close()` stops
    all three. `allowed`, `polling` and `other` are the page's three origins (module docstring)."""

    def __init__(self, binary, *relay_args):
        self.page = serve.ChatServer("127.0.0.1:0", "http://127.0.0.1:1", KEY, ["alice", "bob"])
        threading.Thread(target=self.page.serve_forever, daemon=True).start()
        port = self.page.server_address[1]
        self.allowed, self.polling, self.other = (f"http://localhost:{port}", f"http://poll.localhost:{port}",
                                                  f"http://127.0.0.1:{port}")
        self.relay = self.driver = None
        try:
            self.relay = Relay(binary, "--cors-allowed-origins", cors_origins(port), "--ws-allowed-origins",
                               self.allowed, "--push-delay-ms", "300", *relay_args, key=KEY)
            self.page.relay = self.relay.base
            self.driver = browser()
            # The test's own record of what the SDK hands the app, (seq, id, state then), from
            # the moment the app makes its client (before connect()).
            self.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": RECORDER})
        except BaseException:
            self.close()
            raise

    def close(self):
        if self.driver:
            self.driver.quit()
        if self.relay:
            self.relay.stop()
        self.page.shutdown()
        self.page.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # The page

    def open_chat(self, user, origin=None):
        """Loads the chat as `user` and waits until it runs."""
        self.driver.get(f"{origin or self.allowed}/?user={user}")
        assert wait_for(lambda: self.js("return !!(window.chat && window.chat.client)"), 30), self.status()

    def js(self, script, *args):
        return self.driver.execute_script(script, *args)

    def js_async(self, script, *args):
        """Runs `script` with `done` (its callback) as the last argument; returns what it passed."""
        return self.driver.execute_async_script("const done = arguments[arguments.length - 1];\n" + script, *args)

    def state(self):
        return self.js("return window.chat && window.chat.client.state")

    def status(self):
        return self.js("return document.body.innerText")

    def shown(self):
        """The messages on screen: [(seq, id, text)]."""
        return [tuple(item) for item in self.js("""return Array.from(document.querySelectorAll("#messages li[data-seq]"),
            (li) => [Number(li.dataset.seq), li.dataset.id, li.textContent]);""")]

    def send(self, text):
        """Types and sends a message in the page (serve.py posts it to both users)."""
        field = self.driver.find_element(By.ID, "text")
        field.send_keys(text)
        self.driver.find_element(By.CSS_SELECTOR, "#send button").click()
        assert wait_for(lambda: field.get_attribute("value") == ""), "the message was not accepted"

    def severe_logs(self):
        return [entry["message"] for entry in self.driver.get_log("browser") if entry["level"] == "SEVERE"]

    # The chat server's side

    def chat_post(self, sender, text):
        """Posts through the example's server, as the page does: returns the relay's answer."""
        request = urllib.request.Request(self.allowed.replace("localhost", "127.0.0.1") + "/api/messages",
                                         data=json.dumps({"from": sender, "text": text}).encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.loads(answer.read())

    def state_of(self, message_id, user):
        status, body = self.relay.http("GET", f"/v1/messages/{message_id}")
        assert status == 200, body
        return next(r["state"] for r in body["recipients"] if r["userId"] == user)

    def online(self, user):
        status, body = self.relay.http("GET", f"/v1/users/{user}/presence")
        assert status == 200, body
        return body["online"]


def post(relay, message_id, user, text):
    status, body = relay.http("POST", "/v1/messages", {
        "id": message_id, "recipients": [user], "senderId": "carol", "payload": {"from": "carol", "text": text},
        "push": {"title": "carol", "body": text}})
    assert status == 202, body
    return body["recipients"][0]


@check("a page on another origin gets missed and live messages, on its socket and by REST polling through CORS")
def cors_live_and_polling(binary):
    with Setup(binary) as s:
        missed = [s.chat_post("bob", f"missed {n}")["id"] for n in (1, 2)]
        s.open_chat("alice")
        assert wait_for(lambda: s.state() == "live" and len(s.shown()) == 2), (s.state(), s.shown())
        s.send("hello bob")  # typed in the page: serve.py posts it to alice and bob
        assert wait_for(lambda: len(s.shown()) == 3), s.shown()
        shown = s.shown()
        assert [seq for seq, _, _ in shown] == [1, 2, 3], shown
        assert [i for _, i, _ in shown[:2]] == missed and shown[2][2] == "alice: hello bob", shown
        seen = s.js("return window.seen")
        assert [state for _, _, state in seen] == ["syncing", "syncing", "live"], seen
        # The app acks what it shows (on the socket): read on the relay.
        assert wait_for(lambda: s.state_of(shown[2][1], "alice") == "acked"), s.state_of(shown[2][1], "alice")

        # bob's page on an origin whose WebSocket the relay refuses: the SDK polls the catch-up
        # endpoint (GET with Authorization: a preflight) and acks over REST (POST: a preflight).
        s.open_chat("bob", s.polling)
        assert wait_for(lambda: len(s.shown()) == 3, 30), (s.state(), s.status())
        assert s.state() != "live", s.state()
        assert [text for _, _, text in s.shown()] == [text for _, _, text in shown], s.shown()
        assert wait_for(lambda: s.state_of(shown[2][1], "bob") == "acked"), s.state_of(shown[2][1], "bob")
        refused = [line for line in s.severe_logs() if "WebSocket" in line and "403" in line]
        assert refused, "the polling origin's WebSocket was not refused"
        return f"alice: 2 missed + 1 live on the socket; bob at {s.polling}: 3 by polling, acked over REST"


@check("the relay killed (kill -9) and restarted, messages posted meanwhile: each shown once, in seq order")
def kill9_restart(binary):
    with Setup(binary) as s:
        s.open_chat("alice")
        assert wait_for(lambda: s.state() == "live"), s.status()
        for n in (1, 2):
            post(s.relay, f"k{n}", "alice", f"before {n}")
        assert wait_for(lambda: len(s.shown()) == 2), s.shown()
        s.relay.kill9()
        assert wait_for(lambda: s.state() != "live"), s.state()
        s.relay.start()
        # Posted right after the restart: the page is in its backoff wait, or reconnecting, or
        # back; each must come once, by the catch-up or live.
        for n in range(3, 11):
            post(s.relay, f"k{n}", "alice", f"after {n}")
        assert wait_for(lambda: len(s.shown()) >= 10 and s.state() == "live", 60), (s.state(), s.shown())
        post(s.relay, "k11", "alice", "live again")
        assert wait_for(lambda: len(s.shown()) >= 11), s.shown()
        time.sleep(0.5)  # a duplicate would come right behind the last message
        shown = s.shown()
        assert [i for _, i, _ in shown] == [f"k{n}" for n in range(1, 12)], shown
        assert [seq for seq, _, _ in shown] == list(range(1, 12)), shown
        seen = s.js("return window.seen")
        assert [seq for seq, _, _ in seen] == list(range(1, 12)), seen
        assert not s.js("return document.querySelectorAll('#messages .note').length"), s.status()
        synced = sum(1 for _, _, state in seen[2:10] if state == "syncing")
        return f"k1–k11 once, seq 1–11; {synced} of the 8 posted after the restart came by the catch-up"


@check("enterBackground(): the device goes offline and its push goes out; back in front, the read clears it")
def background_push(binary):
    receiver = Receiver()
    try:
        with Setup(binary) as s:
            s.open_chat("alice")
            assert wait_for(lambda: s.state() == "live"), s.status()
            device = s.js("return window.chat.deviceId")
            status, body = s.relay.http("PUT", f"/v1/users/alice/devices/{device}", {"pushUrl": receiver.base + "/alice"})
            assert status in (200, 201), body
            assert post(s.relay, "c1", "alice", "while in front")["delivery"] == "live"
            assert wait_for(lambda: len(s.shown()) == 1 and s.state_of("c1", "alice") == "acked"), s.shown()

            s.js_async("window.chat.client.enterBackground().then(() => done())")
            assert s.state() == "offline", s.state()
            assert wait_for(lambda: not s.online("alice")), "alice is still online"
            assert post(s.relay, "c2", "alice", "while away")["delivery"] == "push"
            assert wait_for(lambda: receiver.bodies("/alice"), 30), receiver.bodies()
            push = receiver.bodies("/alice")[0]
            assert push["type"] == "message" and push["messageId"] == "c2" and push["seq"] == {"from": 2, "to": 2}, push
            assert push["push"] == {"title": "carol", "body": "while away"} and push["unread"] == 1, push
            assert len(s.shown()) == 1, s.shown()

            s.js("window.chat.client.enterForeground()")
            assert wait_for(lambda: len(s.shown()) == 2 and s.state() == "live"), (s.state(), s.shown())
            # Shown, so acked: the pushed device gets a clear with the badge at 0.
            assert wait_for(lambda: any(b["type"] == "clear" for b in receiver.bodies("/alice")), 30), receiver.bodies()
            clear = [b for b in receiver.bodies("/alice") if b["type"] == "clear"][0]
            assert clear["unread"] == 0 and clear["seq"]["to"] == 2, clear
            return f"c1 live and acked; c2 pushed (seq 2, unread 1) while in the background; shown and cleared after"
    finally:
        receiver.shutdown()


def registration_id(driver, scope):
    """The DevTools id of the service worker registration for `scope`: asked over the browser's
    DevTools socket (ServiceWorker.enable reports every registration), as Selenium gives no events."""
    from websockets.sync.client import connect
    address = driver.capabilities["goog:chromeOptions"]["debuggerAddress"]
    with urllib.request.urlopen(f"http://{address}/json/version", timeout=10) as answer:
        url = json.loads(answer.read())["webSocketDebuggerUrl"]
    deadline = time.monotonic() + 20
    with connect(url, max_size=None, open_timeout=10) as ws:
        def call(message_id, method, params=None, session=None):
            ws.send(json.dumps({"id": message_id, "method": method, "params": params or {},
                                **({"sessionId": session} if session else {})}))
            while True:
                message = json.loads(ws.recv(max(0.1, deadline - time.monotonic())))
                if message.get("id") == message_id:
                    assert "error" not in message, message
                    return message["result"]
        targets = call(1, "Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        session = call(2, "Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})["sessionId"]
        call(3, "ServiceWorker.enable", session=session)
        while time.monotonic() < deadline:
            message = json.loads(ws.recv(max(0.1, deadline - time.monotonic())))
            if message.get("method") == "ServiceWorker.workerRegistrationUpdated":
                for registration in message["params"]["registrations"]:
                    if registration["scopeURL"] == scope and not registration["isDeleted"]:
                        return registration["registrationId"]
    raise AssertionError(f"no service worker registration for {scope}")


def notifications(s):
    """What the page's service worker shows: [{title, body, tag}]."""
    return s.js_async("""navigator.serviceWorker.getRegistration().then((r) => r.getNotifications())
        .then((shown) => done(shown.map((n) => ({ title: n.title, body: n.body, tag: n.tag }))),
              (error) => done(String(error)))""")


# The page's pushManager, for Chromium cannot subscribe to a real push service here: subscribe()
# hands out the double's subscription and remembers the key the SDK passed.
STUB_PUSH_MANAGER = """
const subscription = arguments[0];
const fake = {
  endpoint: subscription.endpoint, expirationTime: null,
  options: { userVisibleOnly: true, applicationServerKey: null },
  toJSON: () => subscription, unsubscribe: async () => true,
};
PushManager.prototype.getSubscription = async () => null;
PushManager.prototype.subscribe = async (options) => {
  fake.options.applicationServerKey = new Uint8Array(options.applicationServerKey).buffer;
  window.subscribedWith = { userVisibleOnly: options.userVisibleOnly, key: Array.from(new Uint8Array(options.applicationServerKey)) };
  return fake;
};
"""


@check("Web Push end to end: enablePush, the relay's push decrypted by the double, shown by the worker, withdrawn on clear")
def web_push(binary):
    service = WebPushEndpoint()
    try:
        with Setup(binary, "--vapid-key-file", vapid_key(), "--vapid-subject", "mailto:ops@example.com",
                   "--push-ca-file", ca_file(), "--web-push-allowed-hosts", "127.0.0.1:*") as s:
            origin = s.allowed
            s.driver.execute_cdp_cmd("Browser.grantPermissions", {"origin": origin, "permissions": ["notifications"]})
            s.open_chat("alice")
            assert wait_for(lambda: s.state() == "live"), s.status()
            status, key = s.relay.http("GET", "/v1/webpush/key")
            assert status == 200, key
            subscription = service.make_subscription(application_server_key=key["publicKey"])
            s.js(STUB_PUSH_MANAGER, subscription)
            s.driver.find_element(By.ID, "notify").click()  # the page's button: client.enablePush(registration)
            assert wait_for(lambda: s.js("return document.getElementById('push-status').textContent")), s.status()
            assert s.js("return document.getElementById('push-status').textContent") == "notifications on", s.status()
            used = s.js("return window.subscribedWith")
            assert used["userVisibleOnly"] is True and bytes(used["key"]) == b64url_decode(key["publicKey"]), used
            device = s.js("return window.chat.deviceId")
            _, devices = s.relay.http("GET", "/v1/users/alice/devices")
            mine = next(d for d in devices["devices"] if d["deviceId"] == device)
            assert mine["transport"] == "webPush", mine
            s.driver.execute_cdp_cmd("ServiceWorker.enable", {})  # for deliverPushMessage
            registration = registration_id(s.driver, origin + "/")

            # The tab is closed (no window of the chat is open, none is focused): pushes take over.
            s.driver.get("about:blank")
            assert wait_for(lambda: not s.online("alice")), "alice is still online"
            post(s.relay, "w1", "alice", "are you there?")
            assert wait_for(lambda: service.payloads(subscription), 30), service.requests
            message = service.payloads(subscription)[0]
            assert message["type"] == "message" and message["messageId"] == "w1", message
            s.driver.execute_cdp_cmd("ServiceWorker.deliverPushMessage",
                                     {"origin": origin, "registrationId": registration, "data": json.dumps(message)})
            s.driver.get(origin + "/")  # the lobby: a page of the origin that does not connect
            expected = [{"title": "carol", "body": "are you there?", "tag": "pushrelay:alice"}]
            assert wait_for(lambda: notifications(s) == expected), notifications(s)
            shown_at = time.monotonic()

            # Read on another device: the relay sends a clear, the worker withdraws the notification.
            status, _ = s.relay.http("POST", "/v1/users/alice/ack", {"seq": 1})
            assert status == 204
            clears = lambda: [p for p in service.payloads(subscription) if p["type"] == "clear"]  # noqa: E731
            assert wait_for(clears, 30), service.payloads(subscription)
            clear = clears()[0]
            assert clear["unread"] == 0 and clear["seq"]["to"] == 1, clear
            # Headless Chromium drops a notification by itself about 25 s after showing it: the
            # clear must find it there, and close it well before that.
            assert notifications(s) == expected, notifications(s)
            assert time.monotonic() - shown_at < 12, f"the clear came {time.monotonic() - shown_at:.0f} s after the show"
            s.driver.execute_cdp_cmd("ServiceWorker.deliverPushMessage",
                                     {"origin": origin, "registrationId": registration, "data": json.dumps(clear)})
            assert wait_for(lambda: notifications(s) == [], 8), notifications(s)
            assert not service.violations, service.violations
            return (f"subscribed with the relay's key; push w1 decrypted at the double, shown as "
                    f"{expected[0]['title']!r}/{expected[0]['body']!r}; the clear (unread 0) closed it")
    finally:
        service.close()


FETCH = """
const [url, init] = arguments;
fetch(url, init).then((r) => r.text().then((body) => done({ status: r.status, body })),
                      (error) => done({ error: error.name + ": " + error.message }));
"""


@check("CORS refuses what is not allowed: another origin cannot read the catch-up, no page can use a server key")
def cors_refusals(binary):
    with Setup(binary) as s:
        post(s.relay, "r1", "alice", "secret")
        token = s.relay.token("alice", "tab")
        catch_up = [s.relay.base + "/v1/users/alice/messages?after=0", {"headers": {"Authorization": f"Bearer {token}"}}]
        # The origin listed nowhere (the lobby: a page of it that does not connect).
        s.driver.get(s.other + "/")
        refused = s.js_async(FETCH, *catch_up)
        assert refused.get("error", "").startswith("TypeError"), refused
        plain = s.js_async(FETCH, s.relay.base + "/v1/webpush/key", {})  # no preflight; still no CORS header
        assert plain.get("error", "").startswith("TypeError"), plain
        opened = s.js_async("""const ws = new WebSocket(arguments[0]);
            ws.onopen = () => { ws.close(); done("open"); }; ws.onerror = () => done("refused");""",
                            s.relay.base.replace("http", "ws") + "/v1/ws?access_token=" + token)
        assert opened == "refused", opened

        # The listed origin reads the same answer...
        s.driver.get(s.allowed + "/")
        allowed = s.js_async(FETCH, *catch_up)
        assert allowed.get("status") == 200 and "r1" in allowed["body"], allowed
        # ...but no route of the server key answers CORS: the preflight fails, nothing is posted.
        posted = s.js_async(FETCH, s.relay.base + "/v1/messages", {
            "method": "POST", "headers": {"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
            "body": json.dumps({"id": "from-a-page", "recipients": ["alice"], "payload": {}})})
        assert posted.get("error", "").startswith("TypeError"), posted
        status, _ = s.relay.http("GET", "/v1/messages/from-a-page")
        assert status == 404, status
        return f"{s.other}: catch-up and key refused, WebSocket refused; {s.allowed}: 200; a server-key POST refused"


def main(argv):
    binary = argv[1]
    started = time.monotonic()
    code = run_checks(checks, lambda fn: fn(binary))
    print(f"browser_peer: {time.monotonic() - started:.1f} s")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
