#!/usr/bin/env python3
"""The operator console in a real browser: headless Chromium (Debian `chromium`,
`chromium-driver`) driven by Selenium, against the real relay binary.

    console_peer.py BINARY [--screenshot PATH]

Checks: the page loads and signs in with no console errors; a wrong key shows a clear error; a
message posted by the test appears live in the watch panel; a dead letter made by the test is
replayed with its button and then shows as delivered. `--screenshot` saves the console, as
docs/API.md shows it, after the checks."""
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

from relaypeer import Receiver, Relay, registry, run_checks, wait_for

KEY = "console-test-server-key"
checks, check = registry()


def browser():
    options = Options()
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1400,1600"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


class Context:
    def __init__(self, binary):
        self.receiver = Receiver()
        self.relay = Relay(binary, "--push-delay-ms", "0", key=KEY)
        self.driver = browser()
        self.driver.set_page_load_timeout(20)

    def close(self):
        self.driver.quit()
        self.relay.stop()
        self.receiver.shutdown()

    def open_console(self):
        self.driver.get(self.relay.base + "/console")
        self.driver.execute_script("sessionStorage.clear()")
        self.driver.get(self.relay.base + "/console")

    def sign_in(self, key):
        field = self.driver.find_element(By.ID, "key")
        field.clear()
        field.send_keys(key)
        self.driver.find_element(By.CSS_SELECTOR, "#login-form button").click()

    def text(self, element_id):
        return self.driver.find_element(By.ID, element_id).text

    def visible(self, element_id):
        return self.driver.find_element(By.ID, element_id).is_displayed()

    def severe_logs(self):
        return [entry for entry in self.driver.get_log("browser") if entry["level"] == "SEVERE"]


@check("a wrong key shows a clear error and keeps the console closed")
def wrong_key(ctx):
    ctx.open_console()
    ctx.sign_in("not-the-key")
    assert wait_for(lambda: "refused" in ctx.text("login-error")), ctx.text("login-error")
    assert not ctx.visible("app")
    ctx.driver.get_log("browser")  # the 401 of this check is expected; start the next one clean
    return ctx.text("login-error")


@check("the console loads and signs in with no browser console errors")
def loads(ctx):
    ctx.open_console()
    ctx.sign_in(KEY)
    assert wait_for(lambda: ctx.visible("app") and "Users online" in ctx.text("cards")), ctx.text("login-error")
    assert wait_for(lambda: "up" in ctx.text("node"))
    time.sleep(2.5)  # one periodic refresh
    errors = ctx.severe_logs()
    assert not errors, errors
    policy = ctx.driver.execute_script(
        "return fetch('/console').then(r => r.headers.get('content-security-policy'))")
    assert policy and "default-src 'none'" in policy, policy
    return "signed in; cards, plots and tables rendered; CSP " + policy.split(";")[0]


@check("a message posted by the test appears live in the watch panel")
def watch(ctx):
    field = ctx.driver.find_element(By.ID, "watch-user")
    field.clear()
    field.send_keys("alice")
    ctx.driver.find_element(By.CSS_SELECTOR, "#watch-form button[type=submit]").click()
    assert wait_for(lambda: "Watching alice" in ctx.text("watch-status")), ctx.text("watch-status")
    started = time.monotonic()
    status, body = ctx.relay.http("POST", "/v1/messages", {"id": "console-live-1", "recipients": ["alice"],
                                                           "payload": {"text": "hello from the test"}})
    assert status == 202, body
    assert wait_for(lambda: "console-live-1" in ctx.text("frames")), ctx.text("frames")
    seen = time.monotonic() - started
    # The watch socket is opened in the background: alice is not online because the console looks
    # at her, and once the watch stops, nothing of it is left in her presence.
    status, presence = ctx.relay.http("GET", "/v1/users/alice/presence")
    assert status == 200 and presence["online"] is False and presence["devices"] == [], presence
    ctx.driver.find_element(By.ID, "unwatch").click()
    time.sleep(1)  # the close reaches the relay, which would record the device's lastOnline now
    status, presence = ctx.relay.http("GET", "/v1/users/alice/presence")
    assert status == 200 and presence["devices"] == [] and presence["lastOnline"] is None, presence
    assert not ctx.severe_logs()
    return f"frame shown {seen * 1000:.0f} ms after the POST; alice still offline, no device left by the watch"


@check("a dead letter is replayed with its button and then shows as delivered")
def replay(ctx):
    path = "/bob/phone"
    ctx.receiver.status[path] = 400  # a 4xx: dead at once
    status, body = ctx.relay.http("PUT", "/v1/users/bob/devices/phone", {"pushUrl": ctx.receiver.base + path})
    assert status in (200, 201), body
    status, body = ctx.relay.http("POST", "/v1/messages", {"id": "console-dead-1", "recipients": ["bob"],
                                                           "payload": {"text": "x"}, "push": {"title": "T"}})
    assert status == 202, body
    buttons = lambda: ctx.driver.find_elements(By.CSS_SELECTOR, "#dead button[data-delivery]")
    assert wait_for(lambda: buttons() and "console-dead-1" in ctx.text("dead")), ctx.text("dead")
    ctx.receiver.status[path] = 204
    buttons()[0].click()
    assert wait_for(lambda: ctx.receiver.paths().count(path) >= 2), ctx.receiver.paths()
    assert wait_for(lambda: "console-dead-1" not in ctx.text("dead")), ctx.text("dead")
    field = ctx.driver.find_element(By.ID, "message-id")
    field.clear()
    field.send_keys("console-dead-1")
    ctx.driver.find_element(By.CSS_SELECTOR, "#lookup-form button").click()
    assert wait_for(lambda: "pushed" in ctx.text("timeline")), ctx.text("timeline")
    timeline = ctx.text("timeline")
    assert "bob · seq 1 · pushed" in timeline, timeline
    # The trace: the phone's decision and both attempts, the 400 and the replay's 204.
    assert "phone (webhook" in timeline and "HTTP 400 · dead" in timeline and "HTTP 204 · delivered" in timeline, \
        timeline
    # A dead letter's message id opens its trace too.
    ctx.receiver.status[path] = 400
    status, body = ctx.relay.http("POST", "/v1/messages", {"id": "console-dead-2", "recipients": ["bob"],
                                                           "payload": {"text": "y"}})
    assert status == 202, body
    links = lambda: ctx.driver.find_elements(By.CSS_SELECTOR, "#dead button.link")
    assert wait_for(lambda: any(link.text == "console-dead-2" for link in links())), ctx.text("dead")
    next(link for link in links() if link.text == "console-dead-2").click()
    assert wait_for(lambda: "console-dead-2" in ctx.driver.find_element(By.ID, "message-id").get_attribute("value")
                    and "dead" in ctx.text("timeline") and "HTTP 400" in ctx.text("timeline")), ctx.text("timeline")
    assert not ctx.severe_logs()
    return "replayed; the timeline shows: " + ctx.text("timeline").replace("\n", " | ")


def take_screenshot(ctx, path):
    """Some life for the picture: two users online, a receiver failing into its breaker, a dead
    letter, a little traffic for the plots; then two refreshes and the shot."""
    import contextlib
    from websockets.sync.client import connect
    sockets = contextlib.ExitStack()
    for user in ("carol", "dave"):
        status, token = ctx.relay.http("POST", "/v1/tokens", {"userId": user, "deviceId": "laptop"})
        sockets.enter_context(connect(ctx.relay.base.replace("http://", "ws://") + "/v1/ws?access_token=" + token["token"]))
    for n in range(6):
        ctx.receiver.status[f"/erin{n}/phone"] = 503
        ctx.relay.http("PUT", f"/v1/users/erin{n}/devices/phone", {"pushUrl": f"{ctx.receiver.base}/erin{n}/phone"})
    other = Receiver()  # another host: the failing one's breaker does not hold it
    other.status["/fay/phone"] = 400
    ctx.relay.http("PUT", "/v1/users/fay/devices/phone", {"pushUrl": f"{other.base}/fay/phone"})
    for n in range(40):
        ctx.relay.http("POST", "/v1/messages", {"id": f"shot-{n}", "recipients": ["carol", "dave", f"erin{n % 6}"],
                                                "payload": {"n": n}, "push": {"title": "Team", "body": f"update {n}"}})
        time.sleep(0.05)
    ctx.relay.http("POST", "/v1/messages", {"id": "invoice-7", "recipients": ["fay"], "payload": {"n": 7},
                                            "push": {"title": "Billing", "body": "Invoice 7"}})
    field = ctx.driver.find_element(By.ID, "message-id")
    field.clear()
    field.send_keys("shot-39")
    ctx.driver.find_element(By.CSS_SELECTOR, "#lookup-form button").click()
    time.sleep(4.5)
    ctx.driver.save_screenshot(path)
    sockets.close()
    other.shutdown()


def main(argv):
    binary = argv[1]
    screenshot = argv[argv.index("--screenshot") + 1] if "--screenshot" in argv else None
    ctx = Context(binary)
    try:
        code = run_checks(checks, lambda fn: fn(ctx))
        if screenshot and code == 0:
            take_screenshot(ctx, screenshot)
        return code
    finally:
        ctx.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
