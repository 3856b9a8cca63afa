// The SDK end to end under Node against the real relay binary (PUSHRELAY_BIN), with a WebSocket
// injected as React Native would inject its own (test/nodews.mjs: a small RFC 6455 client with
// the browser's API). Each test starts its own relay and stops it, whatever happens.
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { RelayAuthError, RelayClient, RelayRequestError, asyncStorageCursorStore, memoryCursorStore } from "../pushrelay.js";
import { NodeWebSocket } from "./nodews.mjs";
import { Relay, WAIT_MS, relayBinary, waitFor, withTimeout } from "./relay.mjs";

const TEST_TIMEOUT = 120000;

/** Runs `body` with a started relay, then stops the relay and closes every client made. */
async function withRelay(extra, body) {
  const relay = await new Relay(relayBinary(), extra).start();
  const clients = [];
  try {
    await body(relay, (options) => {
      const client = new RelayClient({
        url: relay.base,
        WebSocket: NodeWebSocket,
        backoff: { baseMs: 200, capMs: 1000 },
        ...options,
      });
      clients.push(client);
      return client;
    });
  } finally {
    await Promise.all(clients.map((client) => client.close().catch(() => {})));
    await relay.stop();
  }
}

/** Collects a client's messages, every one as it comes (the checks compare whole lists: a listener's
 * exception would only be reported by the SDK). */
function collect(client) {
  const messages = [];
  client.on("message", (message) => messages.push(message));
  return messages;
}

const ids = (messages) => messages.map((m) => m.id);

test("connect: catch-up, then live messages, every field, acks reach the relay", { timeout: TEST_TIMEOUT }, async () => {
  await withRelay([], async (relay, makeClient) => {
    await relay.post("m1", "alice", { conversationId: "c1", senderId: "carol", payload: { text: "hi", n: 1 } });
    await relay.post("m2", "alice");
    const token = await relay.token("alice", "browser");
    const client = makeClient({ userId: "alice", deviceId: "browser", getToken: async () => token });
    const states = [];
    client.on("state", (state) => states.push(state));
    const messages = collect(client);
    await withTimeout(client.connect(), WAIT_MS, "connect()");
    assert.deepEqual(ids(messages), ["m1", "m2"]);
    assert.equal(client.state, "live");
    assert.deepEqual(states.slice(0, 3), ["connecting", "syncing", "live"]);
    const first = messages[0];
    assert.equal(first.seq, 1);
    assert.equal(first.conversationId, "c1");
    assert.equal(first.senderId, "carol");
    assert.deepEqual(first.payload, { text: "hi", n: 1 });
    assert.match(first.createdAt, /^\d{4}-\d\d-\d\dT/);
    assert.equal("type" in first, false);

    const answer = await relay.post("m3", "alice");
    assert.equal(answer.recipients[0].delivery, "live");
    await waitFor(() => messages.length === 3, "the live message");
    assert.deepEqual(ids(messages), ["m1", "m2", "m3"]);

    client.ack(2);
    client.ack(3);
    await waitFor(async () => (await relay.http("GET", "/v1/messages/m3")).body.recipients[0].state === "acked", "the ack");
    assert.equal(client.cursor.seq, 3);
  });
});

test("kill -9 and a restart with messages posted meanwhile: each once, in order", { timeout: TEST_TIMEOUT }, async () => {
  await withRelay([], async (relay, makeClient) => {
    // The longest first wait (random 1), 3 s: the messages posted after the restart are all in
    // before the client returns, so they come through its catch-up.
    const client = makeClient({ userId: "bob", deviceId: "tab", getToken: () => relay.token("bob", "tab"), backoff: { baseMs: 3000 }, random: () => 1 });
    const messages = collect(client);
    const syncingWhen = new Map();
    client.on("message", (m) => syncingWhen.set(m.id, client.state));
    for (let n = 1; n <= 3; n++) await relay.post(`b${n}`, "bob");
    await withTimeout(client.connect(), WAIT_MS, "connect()");
    await relay.post("b4", "bob");
    await waitFor(() => messages.length === 4, "b4 live");

    await relay.kill9();
    await waitFor(() => client.state === "waiting", "the client to notice");
    await relay.start();
    // Posted right after the restart: the client is in its backoff wait, or reconnecting, or
    // back; each message must come once, through the catch-up or live.
    for (let n = 5; n <= 12; n++) await relay.post(`b${n}`, "bob");
    await waitFor(() => messages.length >= 12 && client.state === "live", "b5…b12 after the restart");
    for (let n = 13; n <= 15; n++) await relay.post(`b${n}`, "bob");
    await waitFor(() => messages.length >= 15, "b13…b15 live");
    assert.deepEqual(ids(messages), Array.from({ length: 15 }, (_, i) => `b${i + 1}`));
    assert.deepEqual(messages.map((m) => m.seq), Array.from({ length: 15 }, (_, i) => i + 1));
    assert.equal(syncingWhen.get("b5"), "syncing", "b5 came through the catch-up");
    assert.equal(syncingWhen.get("b13"), "live");
  });
});

test("a refused token: connect() rejects after one fresh token was refused too", { timeout: TEST_TIMEOUT }, async () => {
  await withRelay([], async (_relay, makeClient) => {
    const asked = [];
    const client = makeClient({
      userId: "carol",
      deviceId: "tab",
      getToken: async ({ forceRefresh }) => {
        asked.push(forceRefresh);
        return "not-a-token";
      },
    });
    const states = [];
    client.on("state", (state) => states.push(state));
    await assert.rejects(withTimeout(client.connect(), WAIT_MS, "connect() to fail"), (error) => {
      assert.ok(error instanceof RelayAuthError, String(error));
      assert.equal(error.name, "RelayAuthError");
      return true;
    });
    assert.deepEqual(asked, [false, true]);
    assert.equal(client.state, "offline");
    assert.equal(states.at(-1), "offline");
  });
});

test("an expired token: fetched again with forceRefresh, then connected", { timeout: TEST_TIMEOUT }, async () => {
  await withRelay([], async (relay, makeClient) => {
    await relay.post("d1", "dave");
    const good = await relay.token("dave", "tab");
    const asked = [];
    const client = makeClient({
      userId: "dave",
      deviceId: "tab",
      getToken: async ({ forceRefresh }) => {
        asked.push(forceRefresh);
        return forceRefresh ? good : "expired.token.value";
      },
    });
    const messages = collect(client);
    await withTimeout(client.connect(), WAIT_MS, "connect()");
    assert.deepEqual(asked, [false, true]);
    assert.deepEqual(ids(messages), ["d1"]);
  });
});

test("no socket to be had: REST catch-up polling delivers, connect() resolves, acks go over REST", { timeout: TEST_TIMEOUT }, async () => {
  await withRelay([], async (relay, makeClient) => {
    /** A WebSocket that never opens (a proxy that blocks the upgrade). */
    class BlockedSocket {
      constructor() {
        this.readyState = 0;
        this.onopen = this.onmessage = this.onerror = this.onclose = null;
        setTimeout(() => {
          this.readyState = 3;
          this.onerror?.({});
          this.onclose?.({ code: 1006, reason: "" });
        }, 5);
      }
      send() {
        throw new Error("not open");
      }
      close() {}
    }
    for (let n = 1; n <= 3; n++) await relay.post(`e${n}`, "erin");
    const token = await relay.token("erin", "tab");
    const client = makeClient({ userId: "erin", deviceId: "tab", getToken: async () => token, WebSocket: BlockedSocket });
    const messages = collect(client);
    await withTimeout(client.connect(), WAIT_MS, "connect() by polling");
    assert.deepEqual(ids(messages), ["e1", "e2", "e3"]);
    await relay.post("e4", "erin");
    await waitFor(() => messages.length === 4, "e4 by a later poll");
    assert.deepEqual(ids(messages), ["e1", "e2", "e3", "e4"]);
    client.ack(4);
    await waitFor(async () => (await relay.http("GET", "/v1/messages/e4")).body.recipients[0].state === "acked", "the REST ack");
  });
});

test("another epoch: a resync, then the new inbox's messages", { timeout: TEST_TIMEOUT }, async () => {
  await withRelay([], async (relay, makeClient) => {
    await relay.post("f1", "frank");
    const token = await relay.token("frank", "tab");
    const store = memoryCursorStore({ epoch: "an-older-inbox", seq: 40 });
    const client = makeClient({ userId: "frank", deviceId: "tab", getToken: async () => token, cursorStore: store });
    const resyncs = [];
    client.on("resync", (reason) => resyncs.push(reason));
    const messages = collect(client);
    await withTimeout(client.connect(), WAIT_MS, "connect()");
    assert.equal(resyncs.length, 1);
    assert.equal(resyncs[0].reason, "epochChanged");
    assert.notEqual(resyncs[0].epoch, "an-older-inbox");
    assert.deepEqual(await store.load(), { epoch: resyncs[0].epoch, seq: 1 });
    await relay.post("f2", "frank");
    await waitFor(() => messages.length === 1, "f2 live");
    assert.deepEqual(ids(messages), ["f2"]);
  });
});

test("background and foreground; two tabs of one device are online while either is", { timeout: TEST_TIMEOUT }, async () => {
  await withRelay([], async (relay, makeClient) => {
    const tabA = makeClient({ userId: "gina", deviceId: "laptop", getToken: () => relay.token("gina", "laptop") });
    const tabB = makeClient({ userId: "gina", deviceId: "laptop", getToken: () => relay.token("gina", "laptop") });
    const a = collect(tabA);
    const b = collect(tabB);
    await withTimeout(Promise.all([tabA.connect(), tabB.connect()]), WAIT_MS, "both tabs");
    await tabA.enterBackground();
    assert.equal(tabA.state, "offline");
    assert.equal((await relay.post("g1", "gina")).recipients[0].delivery, "live", "tab B keeps the device online");
    await waitFor(() => b.length === 1, "g1 in tab B");
    await tabB.enterBackground();
    // The relay reads the background frame in its own time (a post sent at once may still find
    // the device online): the next post is stored once the relay says the device is offline.
    const presence = () => relay.http("GET", "/v1/users/gina/presence");
    await waitFor(async () => (await presence()).body.online === false, "gina offline at the relay");
    assert.equal((await relay.post("g2", "gina")).recipients[0].delivery, "stored", "no tab in the foreground");
    tabA.enterForeground();
    await waitFor(() => a.length === 2 && tabA.state === "live", "tab A to catch up");
    assert.deepEqual(ids(a), ["g1", "g2"]);
    assert.equal((await relay.post("g3", "gina")).recipients[0].delivery, "live");
  });
});

test("signals in; a signal out needs an open socket", { timeout: TEST_TIMEOUT }, async () => {
  await withRelay([], async (relay, makeClient) => {
    const token = await relay.token("hana", "tab");
    const client = makeClient({ userId: "hana", deviceId: "tab", getToken: async () => token });
    const signals = [];
    client.on("signal", (signal) => signals.push(signal));
    await withTimeout(client.connect(), WAIT_MS, "connect()");
    const sent = await relay.http("POST", "/v1/signals", { recipients: ["hana"], conversationId: "c1", name: "typing", senderId: "ivan", data: { n: 1 } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    await waitFor(() => signals.length === 1, "the signal");
    assert.deepEqual(signals[0], { conversationId: "c1", name: "typing", senderId: "ivan", data: { n: 1 } });
    client.sendSignal({ conversationId: "c1", name: "typing" }); // accepted on the open socket
    assert.throws(() => client.sendSignal({ conversationId: "c1", name: "no spaces" }), { name: "RelaySignalError", kind: "invalid" });
    await client.close();
    assert.throws(() => client.sendSignal({ conversationId: "c1", name: "typing" }), { name: "RelaySignalError", kind: "notConnected" });
  });
});

/** A TCP proxy to the relay that can stop forwarding without closing anything (a dead link). */
async function blackholeProxy(port) {
  const pairs = new Set();
  let frozen = false;
  const server = createServer((client) => {
    if (frozen) return; // swallowed: never answered
    const upstream = connect(port, "127.0.0.1");
    const pair = { client, upstream };
    pairs.add(pair);
    client.on("data", (data) => !pair.cut && upstream.write(data));
    upstream.on("data", (data) => !pair.cut && client.write(data));
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", end).on("close", end);
    upstream.on("error", end).on("close", end);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: server.address().port,
    cut() {
      for (const pair of pairs) pair.cut = true;
    },
    close() {
      for (const pair of pairs) {
        pair.client.destroy();
        pair.upstream.destroy();
      }
      server.close();
    },
  };
}

test("a dead link (the proxy black-holes the socket) is found from the ping interval", { timeout: TEST_TIMEOUT }, async () => {
  await withRelay(["--ping-interval-ms", "1000"], async (relay, makeClient) => {
    const proxy = await blackholeProxy(relay.port);
    try {
      const token = await relay.token("jack", "tab");
      const client = makeClient({ userId: "jack", deviceId: "tab", getToken: async () => token, url: `http://127.0.0.1:${proxy.port}` });
      const messages = collect(client);
      await withTimeout(client.connect(), WAIT_MS, "connect()");
      const cutAt = Date.now();
      proxy.cut();
      await relay.post("j1", "jack");
      // Rule: 1 s × 1.5 + 5 s = 6.5 s of silence, then a new socket through the proxy.
      await waitFor(() => messages.length === 1, "j1 after the dead link was replaced");
      const took = Date.now() - cutAt;
      assert.ok(took >= 6000, `found dead after ${took} ms: sooner than the rule allows`);
      assert.ok(took < 20000, `found dead after ${took} ms`);
    } finally {
      proxy.close();
    }
  });
});

test("push registration: enablePush with the relay's VAPID key; a missing service is refused", { timeout: TEST_TIMEOUT }, async () => {
  const { privateKey } = generateKeyPairSync("ec", { namedCurve: "prime256v1" });
  const dir = mkdtempSync(join(tmpdir(), "pushrelay-js-vapid-"));
  const keyFile = join(dir, "vapid.pem");
  writeFileSync(keyFile, privateKey.export({ type: "sec1", format: "pem" }));
  const vapid = ["--vapid-key-file", keyFile, "--vapid-subject", "mailto:ops@example.com"];
  await withRelay([...vapid, "--web-push-allowed-hosts", "127.0.0.1:*"], async (relay, makeClient) => {
    const token = await relay.token("kate", "browser");
    const client = makeClient({ userId: "kate", deviceId: "browser", getToken: async () => token, app: "default" });
    const subscribed = [];
    const subscription = {
      endpoint: "https://127.0.0.1:9/push/kate",
      options: { applicationServerKey: null },
      toJSON() {
        return { endpoint: this.endpoint, expirationTime: null, keys: { p256dh: P256DH, auth: AUTH } };
      },
      async unsubscribe() {
        subscribed.push("unsubscribed");
        return true;
      },
    };
    const registration = {
      pushManager: {
        getSubscription: async () => null,
        subscribe: async (options) => {
          subscribed.push(options);
          return subscription;
        },
      },
    };
    // The server registered the device content-free: the app's own registration keeps that.
    const registered = await relay.http("PUT", "/v1/users/kate/devices/browser", {
      webPush: subscription.toJSON(),
      contentFree: true,
    });
    assert.equal(registered.status, 201);
    const result = await client.enablePush(/** @type {any} */ (registration), { platform: "web" });
    assert.equal(result, subscription);
    assert.equal(subscribed[0].userVisibleOnly, true);
    const { body: key } = await relay.http("GET", "/v1/webpush/key");
    assert.equal(Buffer.from(subscribed[0].applicationServerKey).toString("base64url"), key.publicKey);
    const { body: devices } = await relay.http("GET", "/v1/users/kate/devices");
    assert.equal(devices.devices.length, 1);
    assert.equal(devices.devices[0].transport, "webPush");
    assert.equal(devices.devices[0].webPush.endpoint, subscription.endpoint);
    assert.equal(devices.devices[0].platform, "web");
    assert.equal(devices.devices[0].contentFree, true);

    await assert.rejects(client.setPushToken({ fcm: "fcm-token-1" }), (error) => {
      assert.ok(error instanceof RelayRequestError);
      assert.equal(error.status, 400);
      assert.equal(error.code, "transport_unavailable");
      return true;
    });
    await client.logout();
    assert.deepEqual(subscribed.at(-1), "unsubscribed");
  }).finally(() => rmSync(dir, { recursive: true, force: true }));
});

test("React Native's parts: an AsyncStorage-like cursor resumes a restarted app; APNs and FCM tokens register", { timeout: TEST_TIMEOUT }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "pushrelay-js-native-"));
  const apnsKey = join(dir, "AuthKey.p8");
  writeFileSync(apnsKey, generateKeyPairSync("ec", { namedCurve: "prime256v1" }).privateKey.export({ type: "pkcs8", format: "pem" }));
  const fcmAccount = join(dir, "service-account.json");
  writeFileSync(fcmAccount, JSON.stringify({
    type: "service_account", project_id: "pushrelay-test", private_key_id: "k1", token_uri: "https://127.0.0.1:9/token",
    client_email: "pushrelay@pushrelay-test.iam.gserviceaccount.com",
    private_key: generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({ type: "pkcs8", format: "pem" }),
  }));
  const credentials = ["--apns-key-file", apnsKey, "--apns-key-id", "ABCDE12345", "--apns-team-id", "TEAM123456",
    "--apns-topic", "com.example.chat", "--fcm-service-account-file", fcmAccount];
  await withRelay(credentials, async (relay, makeClient) => {
    // AsyncStorage's shape: every method returns a promise.
    const saved = new Map();
    const AsyncStorage = {
      getItem: async (key) => saved.get(key) ?? null,
      setItem: async (key, value) => void saved.set(key, value),
      removeItem: async (key) => void saved.delete(key),
    };
    const app = () => makeClient({
      userId: "rita", deviceId: "phone", getToken: () => relay.token("rita", "phone"),
      cursorStore: asyncStorageCursorStore(AsyncStorage, "pushrelay:rita:phone"),
    });
    await relay.post("n1", "rita");
    await relay.post("n2", "rita");
    const first = app();
    const before = collect(first);
    await withTimeout(first.connect(), WAIT_MS, "connect()");
    assert.deepEqual(ids(before), ["n1", "n2"]);
    await first.close();
    await relay.post("n3", "rita");
    const restarted = app(); // the app was killed and launched again: the cursor is in AsyncStorage
    const after = collect(restarted);
    await withTimeout(restarted.connect(), WAIT_MS, "connect() after the restart");
    assert.deepEqual(ids(after), ["n3"]);

    // Push tokens as a React Native push library hands them over (a hex APNs token, an FCM token).
    // (A phone with calls hands over its PushKit token too.)
    const apns = "a1".repeat(32);
    const voipToken = "b2".repeat(32);
    await restarted.setPushToken({ apns, voipToken, topic: "com.example.chat", environment: "sandbox" });
    let { body } = await relay.http("GET", "/v1/users/rita/devices");
    assert.deepEqual(body.devices.map((d) => [d.deviceId, d.transport, d.apns]),
      [["phone", "apns", { token: apns, voipToken, topic: "com.example.chat", environment: "sandbox" }]]);
    const tablet = makeClient({ userId: "rita", deviceId: "tablet", getToken: () => relay.token("rita", "tablet") });
    await tablet.setPushToken({ fcm: "fcm-registration-token-1" });
    ({ body } = await relay.http("GET", "/v1/users/rita/devices"));
    assert.deepEqual(body.devices.find((d) => d.deviceId === "tablet").fcm, { token: "fcm-registration-token-1" });
    // A client token may not name another topic than the relay's apnsTopic.
    await assert.rejects(restarted.setPushToken({ apns, topic: "com.example.other" }), (error) => {
      assert.ok(error instanceof RelayRequestError);
      assert.equal(error.status, 403);
      assert.equal(error.code, "forbidden");
      return true;
    });
  }).finally(() => rmSync(dir, { recursive: true, force: true }));
});

// A valid P-256 public key and auth secret (RFC 8291's example subscription).
const P256DH = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4";
const AUTH = "BTBZMqHH6r4Tts7J_aSIgg";

// (The relay used to answer `Connection: Upgrade, Upgrade`, which undici refused.)
test(
  "Node's own WebSocket (undici) against the relay",
  { timeout: TEST_TIMEOUT },
  async () => {
    assert.equal(typeof globalThis.WebSocket, "function", "run with --experimental-websocket");
    await withRelay([], async (relay, makeClient) => {
      const token = await relay.token("lena", "tab");
      const client = makeClient({ userId: "lena", deviceId: "tab", getToken: async () => token, WebSocket: globalThis.WebSocket });
      client.connect().catch(() => {});
      // It either goes live, or its first socket fails (and it falls back to polling).
      await waitFor(() => client.state === "live" || client.state === "waiting", "the first socket's outcome");
      assert.equal(client.state, "live");
    });
  },
);
