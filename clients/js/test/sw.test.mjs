// pushrelay-sw.js in a stand-in service worker scope (node:vm): the notifications it shows and
// closes, the badge, the focused-window rule and the click. The payloads are the relay's own
// Web Push JSON (PushNotice.webhookBody), as docs/ARCHITECTURE.md §5 lists its members.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { createContext, runInContext } from "node:vm";

const source = readFileSync(new URL("../pushrelay-sw.js", import.meta.url), "utf8");

/** A service worker scope with the helper loaded as importScripts would load it. */
function worker({ focused = false, windows = focused ? 1 : 0, badging = true } = {}) {
  const shown = [];
  const badges = [];
  const listeners = new Map();
  const opened = [];
  const windowClients = Array.from({ length: windows }, (_, i) => ({
    focused: focused && i === 0,
    posted: [],
    focusedByClick: false,
    postMessage(message) {
      this.posted.push(message);
    },
    async focus() {
      this.focusedByClick = true;
      return this;
    },
  }));
  const scope = {
    registration: {
      scope: "https://chat.example/",
      async showNotification(title, options) {
        const notification = { title, ...options, closed: false, close() { this.closed = true; } };
        // Same tag: the new one replaces the old.
        for (const old of shown) if (old.tag === options.tag) old.closed = true;
        shown.push(notification);
      },
      async getNotifications({ tag } = {}) {
        return shown.filter((n) => !n.closed && (!tag || n.tag === tag));
      },
    },
    clients: {
      async matchAll() {
        return windowClients;
      },
      async openWindow(url) {
        opened.push(url);
      },
    },
    navigator: badging ? { setAppBadge: async (n) => badges.push(n), clearAppBadge: async () => badges.push(0) } : {},
    addEventListener(type, fn) {
      listeners.set(type, fn);
    },
  };
  scope.self = scope;
  createContext(scope);
  runInContext(source, scope);
  /** Fires a push event with `payload` (an object, JSON-encoded as the browser hands it over). */
  const push = async (payload) => {
    const waits = [];
    listeners.get("push")({ data: { json: () => JSON.parse(JSON.stringify(payload)) }, waitUntil: (p) => waits.push(p) });
    await Promise.all(waits);
  };
  const click = async (notification) => {
    const waits = [];
    listeners.get("notificationclick")({ notification, waitUntil: (p) => waits.push(p) });
    await Promise.all(waits);
  };
  return { sw: scope.PushRelaySW, scope, shown, badges, opened, windowClients, push, click };
}

const message = (from, to, extra = {}) => ({
  type: "message", userId: "alice", deviceId: "browser", messageId: `m${to}`, seq: { from, to },
  unread: to, priority: "high", collapseKey: null, push: { title: "Carol", body: `hello ${to}` }, ...extra,
});
const clear = (to, unread) => ({ type: "clear", userId: "alice", deviceId: "browser", seq: { from: to, to }, unread, priority: "normal", collapseKey: null });

test("a message push: title and body, one notification per user, the badge", async () => {
  const { sw, shown, badges, push } = worker();
  sw.install({ icon: "/icon.png" });
  await push(message(1, 2));
  await push(message(3, 3));
  assert.equal(shown.length, 2);
  assert.equal(shown[0].closed, true, "replaced by the next one of the same user");
  assert.deepEqual([shown[1].title, shown[1].body, shown[1].tag, shown[1].icon], ["Carol", "hello 3", "pushrelay:alice", "/icon.png"]);
  assert.deepEqual(shown[1].data.pushrelay.seq, { from: 3, to: 3 });
  assert.deepEqual(badges, [2, 3]);
});

test("content-free pushes and pushes without text get the generic text", async () => {
  const { sw, shown, push } = worker();
  sw.install({ genericTitle: "Chat", genericBody: "You have new messages" });
  const contentFree = message(1, 1);
  delete contentFree.push;
  delete contentFree.messageId;
  await push(contentFree);
  await push(message(2, 2, { push: null }));
  assert.deepEqual(shown.map((n) => [n.title, n.body]), [["Chat", "You have new messages"], ["Chat", "You have new messages"]]);
});

test("clear: closes the notification it covers, not a newer one; the badge follows", async () => {
  const { sw, shown, badges, push } = worker();
  sw.install();
  await push(message(1, 2));
  await push(clear(1, 1)); // read up to 1: the notification covers seq 2
  assert.equal(shown[0].closed, false);
  await push(clear(2, 0));
  assert.equal(shown[0].closed, true);
  assert.deepEqual(badges, [2, 1, 0]);
});

test("nothing shown while a window of the app is focused (the badge still set)", async () => {
  const { sw, shown, badges, push } = worker({ focused: true });
  sw.install();
  await push(message(1, 1));
  assert.equal(shown.length, 0);
  assert.deepEqual(badges, [1]);
});

test("without the Badging API it still shows; other pushes are left alone", async () => {
  const { sw, shown, push } = worker({ badging: false });
  sw.install();
  await push(message(1, 1));
  await push({ hello: "not the relay's" });
  assert.equal(shown.length, 1);
});

test("a click focuses an open window (and tells it), or opens the app", async () => {
  const withWindow = worker({ windows: 1 });
  withWindow.sw.install();
  await withWindow.push(message(1, 1));
  await withWindow.click(withWindow.shown[0]);
  assert.equal(withWindow.shown[0].closed, true);
  assert.equal(withWindow.windowClients[0].focusedByClick, true);
  assert.equal(withWindow.windowClients[0].posted[0].type, "pushrelay.click");
  assert.equal(withWindow.windowClients[0].posted[0].push.messageId, "m1");

  const none = worker();
  none.sw.install({ url: "/chat" });
  await none.push(message(1, 1));
  await none.click(none.shown[0]);
  assert.deepEqual(none.opened, ["/chat"]);
});
