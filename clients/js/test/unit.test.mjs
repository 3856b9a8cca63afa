// The SDK's pure parts, and the client's schedule on a virtual clock with a scripted WebSocket.
import assert from "node:assert/strict";
import { beforeEach, describe, test } from "node:test";
import {
  Backoff,
  CursorTracker,
  LinkWatchdog,
  RelayClient,
  asyncStorageCursorStore,
  localStorageCursorStore,
  memoryCursorStore,
  storageCursorStore,
} from "../pushrelay.js";
import { FakeSocket, FakeTimers, fakeFetch, settle } from "./fakes.mjs";

describe("Backoff: exponential with full jitter", () => {
  test("ceilings double from the base up to the cap", () => {
    const backoff = new Backoff();
    assert.deepEqual([1, 2, 3, 4, 5, 6, 7, 40].map((n) => backoff.ceiling(n)), [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    assert.equal(backoff.ceiling(0), 1000);
    assert.equal(new Backoff({ baseMs: 200, capMs: 1000 }).ceiling(4), 1000);
  });

  test("the delay is uniform in [0, ceiling]: random scales it, clamped", () => {
    const backoff = new Backoff();
    assert.equal(backoff.delay(3, 0), 0);
    assert.equal(backoff.delay(3, 0.25), 1000);
    assert.equal(backoff.delay(3, 1), 4000);
    assert.equal(backoff.delay(3, 7), 4000);
    assert.equal(backoff.delay(3, -1), 0);
  });
});

describe("LinkWatchdog: the dead-link rule", () => {
  test("the relay's interval sets the limit (×1.5 + 5 s), the ping (halfway) and the check", () => {
    const dog = new LinkWatchdog(0);
    assert.equal(dog.silenceLimitMs, 42500);
    assert.equal(dog.pingAfterMs, 33750);
    assert.equal(dog.checkIntervalMs, 5000);
    dog.setPingInterval(1000);
    assert.equal(dog.silenceLimitMs, 6500);
    assert.equal(dog.pingAfterMs, 3750);
    assert.equal(dog.checkIntervalMs, 812.5);
    dog.setPingInterval(Number.NaN);
    assert.equal(dog.silenceLimitMs, 42500);
  });

  test("traffic resets the silence; one ping, then dead", () => {
    const dog = new LinkWatchdog(0, 1000);
    assert.equal(dog.observe(0, 3000), "none");
    assert.equal(dog.observe(1, 3500), "none"); // a frame at 3.5 s
    assert.equal(dog.observe(1, 7000), "none");
    assert.equal(dog.observe(1, 7250), "ping");
    assert.equal(dog.observe(1, 8000), "none"); // pinged once only
    assert.equal(dog.observe(1, 9999), "none");
    assert.equal(dog.observe(1, 10000), "dead");
    assert.equal(dog.observe(2, 10001), "none");
  });
});

describe("CursorTracker: each message once, in order; resyncs", () => {
  test("only seqs above the cursor are delivered", () => {
    const tracker = new CursorTracker({ epoch: "E", seq: 2 });
    assert.deepEqual([1, 2, 3, 3, 5, 4, 6].filter((seq) => tracker.accept(seq)), [3, 5, 6]);
    assert.deepEqual(tracker.cursor, { epoch: "E", seq: 6 });
  });

  test("another epoch: epochChanged, the cursor starts over and takes the relay's synced seq", () => {
    const tracker = new CursorTracker({ epoch: "old", seq: 40 });
    assert.deepEqual(tracker.head({ epoch: "new", complete: false, headSeq: 3 }), { reason: "epochChanged", epoch: "new" });
    assert.deepEqual(tracker.cursor, { epoch: "new", seq: 0 });
    tracker.synced(3);
    assert.deepEqual(tracker.cursor, { epoch: "new", seq: 3 });
  });

  test("a cursor ahead of the inbox (or pruned messages): messagesPruned, then the synced seq even backwards", () => {
    const tracker = new CursorTracker({ epoch: "E", seq: 40 });
    assert.deepEqual(tracker.head({ epoch: "E", complete: false, firstAvailableSeq: 7, headSeq: 9 }), {
      reason: "messagesPruned",
      firstAvailableSeq: 7,
    });
    tracker.synced(9);
    assert.equal(tracker.seq, 9);
    assert.equal(tracker.head({ epoch: "E", complete: true }), null);
    tracker.synced(4); // a normal sync never moves the cursor back
    assert.equal(tracker.seq, 9);
  });

  test("the first epoch is learnt without a resync; garbage cursors start at 0", () => {
    const tracker = new CursorTracker(null);
    assert.equal(tracker.head({ epoch: "E", complete: true }), null);
    assert.equal(tracker.epoch, "E");
    assert.equal(new CursorTracker({ epoch: null, seq: -3 }).seq, 0);
    assert.equal(new CursorTracker(/** @type {any} */ ({ seq: "7" })).seq, 0);
  });
});

describe("cursor stores", () => {
  test("memory", async () => {
    const store = memoryCursorStore();
    assert.equal(await store.load(), null);
    await store.save({ epoch: "E", seq: 4 });
    assert.deepEqual(await store.load(), { epoch: "E", seq: 4 });
    await store.clear();
    assert.equal(await store.load(), null);
  });

  test("localStorage-like (synchronous) and AsyncStorage-like (promises); unreadable data is no cursor", async () => {
    const map = new Map();
    const sync = { getItem: (k) => map.get(k) ?? null, setItem: (k, v) => map.set(k, v), removeItem: (k) => map.delete(k) };
    const asyncStorage = {
      getItem: async (k) => map.get(k) ?? null,
      setItem: async (k, v) => void map.set(k, v),
      removeItem: async (k) => void map.delete(k),
    };
    for (const store of [localStorageCursorStore("k", /** @type {any} */ (sync)), asyncStorageCursorStore(asyncStorage, "k"), storageCursorStore(sync, "k")]) {
      assert.equal(await store.load(), null);
      await store.save({ epoch: "E", seq: 9 });
      assert.equal(map.get("k"), '{"epoch":"E","seq":9}');
      assert.deepEqual(await store.load(), { epoch: "E", seq: 9 });
      map.set("k", "{not json");
      assert.equal(await store.load(), null);
      await store.clear();
      assert.equal(map.has("k"), false);
    }
  });
});

describe("RelayClient on a virtual clock", () => {
  /** @type {FakeTimers} */
  let timers;
  beforeEach(() => {
    FakeSocket.reset();
    timers = new FakeTimers();
  });

  const make = (options = {}) => {
    const tokens = [];
    const client = new RelayClient({
      url: "https://relay.test/",
      userId: "alice",
      deviceId: "tab",
      getToken: async ({ forceRefresh }) => {
        tokens.push(forceRefresh);
        return `token${tokens.length}`;
      },
      WebSocket: /** @type {any} */ (FakeSocket),
      fetch: fakeFetch(() => ({ status: 0 })),
      timers,
      random: () => 0.5,
      ...options,
    });
    return { client, tokens };
  };

  test("the socket URL carries the cursor, epoch, device and token; connect() resolves on synced", async () => {
    const { client } = make({ cursorStore: memoryCursorStore({ epoch: "E1", seq: 7 }) });
    const states = [];
    client.on("state", (s) => states.push(s));
    let resolved = false;
    client.connect().then(() => (resolved = true));
    await settle();
    assert.equal(FakeSocket.last.url, "wss://relay.test/v1/ws?after=7&epoch=E1&deviceId=tab&access_token=token1");
    FakeSocket.last.open();
    FakeSocket.last.sync([8]);
    await settle();
    assert.ok(resolved);
    assert.deepEqual(states, ["connecting", "syncing", "live"]);
  });

  test("reconnects with full jitter, doubling to the cap; a stable connection resets it", async () => {
    const { client } = make({ backoff: { baseMs: 1000, capMs: 4000 } });
    const waits = [];
    client.on("state", (s, detail) => s === "waiting" && waits.push(detail.retryInMs));
    client.connect();
    await settle();
    for (let i = 0; i < 4; i++) {
      FakeSocket.last.drop(); // never opened
      await timers.advance(waits.at(-1) ?? 0);
      await timers.advance(waits.at(-1));
    }
    assert.deepEqual(waits, [500, 1000, 2000, 2000]);
    FakeSocket.last.open();
    FakeSocket.last.sync([]);
    await timers.advance(10000); // up 10 s: stable
    FakeSocket.last.drop();
    await settle();
    assert.equal(waits.at(-1), 500);
  });

  test("across a reconnect each message comes once, in seq order, even if the relay repeats some", async () => {
    const { client } = make();
    const seen = [];
    client.on("message", (m) => seen.push(m.seq));
    client.connect();
    await settle();
    FakeSocket.last.open();
    FakeSocket.last.sync([1, 2, 3]);
    FakeSocket.last.drop(1001);
    await timers.advance(1000);
    assert.match(FakeSocket.last.url, /after=3&epoch=E1&/);
    FakeSocket.last.open();
    FakeSocket.last.sync([2, 3, 4]);
    FakeSocket.last.message(4);
    FakeSocket.last.message(6);
    FakeSocket.last.message(5);
    assert.deepEqual(seen, [1, 2, 3, 4, 6]);
  });

  test("acks are batched: the highest seq in one frame per interval", async () => {
    const { client } = make();
    client.connect();
    await settle();
    FakeSocket.last.open();
    FakeSocket.last.sync([1, 2, 3]);
    client.ack(1);
    client.ack(3);
    client.ack(2);
    await timers.advance(249);
    assert.deepEqual(FakeSocket.last.sent, []);
    await timers.advance(1);
    assert.deepEqual(FakeSocket.last.sent, [{ type: "ack", seq: 3, epoch: "E1" }]);
    client.ack(3);
    await timers.advance(1000);
    assert.equal(FakeSocket.last.sent.length, 1);
  });

  test("a silent link: one refresh frame as a ping, then closed as dead and replaced", async () => {
    const { client } = make();
    client.connect();
    await settle();
    const first = FakeSocket.last;
    first.open();
    first.sync([], { pingIntervalMs: 1000 });
    await timers.advance(3700);
    assert.deepEqual(first.sent, []);
    await timers.advance(900);
    assert.deepEqual(first.sent, [{ type: "refresh", token: "token1" }]);
    first.frame({ type: "refreshed", expiresAt: "2026-01-01T00:00:00Z" }); // traffic: alive
    await timers.advance(6000);
    assert.equal(first.closedByClient, null);
    await timers.advance(1000);
    assert.notEqual(first.closedByClient, null, "dead after 6.5 s of silence");
    assert.equal(client.state, "waiting");
    await timers.advance(500);
    assert.notEqual(FakeSocket.last, first);
  });

  test("an error before the opening ends the attempt even without a close event", async () => {
    const { client } = make();
    client.connect();
    await settle();
    FakeSocket.last.onerror?.({}); // Node's undici fires no close after a refused upgrade
    await settle();
    assert.equal(client.state, "waiting");
    assert.notEqual(FakeSocket.last.closedByClient, null);
  });

  test("a 1008 close asks for a fresh token", async () => {
    const { client, tokens } = make();
    client.connect();
    await settle();
    FakeSocket.last.open();
    FakeSocket.last.sync([]);
    FakeSocket.last.drop(1008, "token expired");
    await timers.advance(500);
    assert.deepEqual(tokens, [false, true]);
    assert.match(FakeSocket.last.url, /access_token=token2$/);
  });

  test("enterBackground: a background frame, pending acks, closed, offline; enterForeground skips the wait", async () => {
    const { client } = make({ random: () => 1 });
    client.connect();
    await settle();
    const socket = FakeSocket.last;
    socket.open();
    socket.sync([1]);
    client.ack(1);
    await client.enterBackground();
    assert.deepEqual(socket.sent, [{ type: "background" }, { type: "ack", seq: 1, epoch: "E1" }]);
    assert.notEqual(socket.closedByClient, null);
    assert.equal(client.state, "offline");
    await timers.advance(60000);
    assert.equal(FakeSocket.made.length, 1, "no reconnect in the background");

    client.enterForeground();
    await settle();
    assert.equal(FakeSocket.made.length, 2);
    FakeSocket.last.drop();
    await settle();
    assert.equal(client.state, "waiting"); // 1 s wait (random 1)…
    client.enterForeground(); // …skipped
    await settle();
    assert.equal(FakeSocket.made.length, 3);
  });

  test("followVisibility: hidden → background, visible → foreground", async () => {
    const { client } = make();
    const listeners = new Map();
    const doc = { visibilityState: "visible", addEventListener: (t, f) => listeners.set(t, f), removeEventListener: (t) => listeners.delete(t) };
    const stop = client.followVisibility(/** @type {any} */ (doc));
    client.connect();
    await settle();
    FakeSocket.last.open();
    FakeSocket.last.sync([]);
    doc.visibilityState = "hidden";
    listeners.get("visibilitychange")();
    await settle();
    assert.equal(client.state, "offline");
    doc.visibilityState = "visible";
    listeners.get("visibilitychange")();
    await settle();
    assert.equal(client.state, "connecting");
    stop();
    assert.equal(listeners.size, 0);
  });

  test("a listener that throws does not stop delivery; on() returns an unsubscribe", async () => {
    const { client } = make();
    const reported = [];
    const original = console.error;
    console.error = (e) => reported.push(e);
    try {
      const seen = [];
      client.on("message", () => {
        throw new Error("app bug");
      });
      const off = client.on("message", (m) => seen.push(m.seq));
      client.connect();
      await settle();
      FakeSocket.last.open();
      FakeSocket.last.sync([1, 2]);
      off();
      FakeSocket.last.message(3);
      assert.deepEqual(seen, [1, 2]);
      assert.equal(reported.length, 3);
    } finally {
      console.error = original;
    }
  });
});
