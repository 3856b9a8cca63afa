// @ts-check
/**
 * PushRelay's JavaScript client: the semantics of the Swift SDK's `RelayClient`, for browsers,
 * React Native and Node ≥ 20. One ES module, no dependency; the WebSocket constructor, `fetch`,
 * the timers, the jitter source and the cursor store can be injected.
 *
 *     import { RelayClient } from "./pushrelay.js";
 *     const client = new RelayClient({ url: "https://relay.example.com", userId: "alice",
 *       deviceId: "browser-1", getToken: async ({ forceRefresh }) => myChat.relayToken(forceRefresh) });
 *     client.on("message", (m) => { show(m); client.ack(m.seq); });
 *     await client.connect();
 *
 * Versioned with the relay: `RelayClient.version` is the relay release these files came with.
 * Wire protocol: docs/API.md (§ The WebSocket, § REST); this file's behaviour: docs/API.md
 * § The JavaScript client SDK.
 */

/**
 * The relay release these files came with: one number covers the binary, the REST contract and
 * the SDKs (docs/OPERATIONS.md § Versioning and compatibility); check.sh compares it with
 * `pushrelay --version`.
 */
export const VERSION = "0.3.0";

// MARK: Types

/**
 * The last message the app has and the inbox it belongs to.
 * @typedef {{ epoch: string | null, seq: number }} RelayCursor
 */

/**
 * Where the client keeps its resume cursor, so that a reloaded page or a restarted app resumes
 * where it was. Every method may return a promise.
 * @typedef {object} CursorStore
 * @property {() => Promise<RelayCursor | null> | RelayCursor | null} load the saved cursor, or null
 * @property {(cursor: RelayCursor) => Promise<void> | void} save keeps the cursor
 * @property {() => Promise<void> | void} clear forgets it (logout)
 */

/**
 * One message of the user's inbox: every member of the relay's `message` frame but `type`
 * (`payload` parsed from JSON).
 * @typedef {object} RelayMessage
 * @property {number} seq the per-user sequence number (the resume cursor)
 * @property {string} id the chat server's message id
 * @property {string} [conversationId]
 * @property {string} [senderId]
 * @property {unknown} payload the chat server's payload, parsed
 * @property {string} createdAt RFC 3339 time the relay accepted it
 */

/**
 * A signal (typing…), received or to send. Live only: never stored, never replayed.
 * @typedef {object} RelaySignal
 * @property {string} conversationId
 * @property {string} name 1–64 of `A–Z a–z 0–9 . _ : -`
 * @property {string} [senderId] who sent it (received signals only)
 * @property {Record<string, unknown>} [data] an optional JSON object, at most 1 KiB
 */

/**
 * Why the app must resynchronize from its chat server.
 * @typedef {{ reason: "epochChanged", epoch: string } | { reason: "messagesPruned", firstAvailableSeq: number }} ResyncReason
 */

/**
 * The Swift SDK's state names: `connecting`, `syncing` (connected, receiving what was missed),
 * `live`, `waiting` (the next attempt in `retryInMs`), `offline` (not trying).
 * @typedef {"connecting" | "syncing" | "live" | "waiting" | "offline"} ConnectionState
 */

/**
 * What a `state` listener gets beside the state.
 * @typedef {{ retryInMs?: number }} StateDetail
 */

/**
 * @typedef {object} RelayEvents
 * @property {(message: RelayMessage) => void} message
 * @property {(state: ConnectionState, detail: StateDetail) => void} state
 * @property {(reason: ResyncReason) => void} resync
 * @property {(signal: RelaySignal) => void} signal
 */

/**
 * The part of a WebSocket the client uses (the browser's, React Native's, Node's with
 * `--experimental-websocket`, or any object that behaves the same way).
 * @typedef {object} WebSocketLike
 * @property {number} readyState 1 while open
 * @property {(data: string) => void} send
 * @property {(code?: number, reason?: string) => void} close
 * @property {((event: any) => void) | null} onopen
 * @property {((event: any) => void) | null} onmessage the client reads `event.data` (text frames)
 * @property {((event: any) => void) | null} onclose the client reads `event.code`
 * @property {((event: any) => void) | null} onerror
 */

/** @typedef {new (url: string) => WebSocketLike} WebSocketConstructor */

/**
 * What a push registration may say besides the token; left out, the relay keeps what the server
 * registered (`contentFree`, `platform`).
 * @typedef {{ contentFree?: boolean, platform?: string }} PushOptions
 */

/**
 * Time, injectable so that tests run the schedule without waiting for it. `now` is a monotonic
 * clock in milliseconds.
 * @typedef {object} Timers
 * @property {(fn: () => void, ms: number) => any} setTimeout
 * @property {(handle: any) => void} clearTimeout
 * @property {() => number} now
 */

/**
 * @typedef {(input: string, init?: any) => Promise<{ status: number, text(): Promise<string> }>} FetchLike
 */

/**
 * @typedef {object} RelayClientOptions
 * @property {string} url the relay's base URL, `http(s)://host:port`
 * @property {string} userId the user whose inbox this is (the token's `sub`)
 * @property {string} [deviceId] this device (required for tokens without `did`, and for push registration)
 * @property {(options: { forceRefresh: boolean }) => Promise<string> | string} getToken
 *   returns a client token; `forceRefresh` is true after the relay refused the last one
 * @property {string} [app] the app this device belongs to, passed along with push registration
 *   and the VAPID key request (for relays that serve several apps)
 * @property {CursorStore} [cursorStore] where the cursor is kept (default: memory only)
 * @property {WebSocketConstructor} [WebSocket] default: `globalThis.WebSocket`
 * @property {FetchLike} [fetch] default: `globalThis.fetch`
 * @property {Partial<Timers>} [timers] default: the global timers and `performance.now()`
 * @property {() => number} [random] jitter source in [0, 1] (default `Math.random`)
 * @property {{ baseMs?: number, capMs?: number }} [backoff] reconnect delays (default 1 s, 30 s)
 * @property {number} [stableAfterMs] a connection up this long resets the backoff (10 s)
 * @property {number} [ackIntervalMs] acks are sent at most this often (250 ms)
 * @property {boolean} [pollWhenSocketFails] poll the catch-up endpoint while no socket opens (true)
 * @property {number} [requestTimeoutMs] each HTTP request of the SDK, and each socket's opening (10 s)
 */

// MARK: Errors

/** The relay refused the credential, also when freshly fetched (`connect()` rejects with it). */
export class RelayAuthError extends Error {
  /**
   * @param {number} status
   * @param {string} [message]
   */
  constructor(status, message) {
    super(message ?? `the relay refused the client token (HTTP ${status})`);
    this.name = "RelayAuthError";
    this.status = status;
  }
}

/** `close()` or `logout()` was called before the first sync (`connect()` rejects with it). */
export class RelayClosedError extends Error {
  constructor() {
    super("the client was closed");
    this.name = "RelayClosedError";
  }
}

/** A REST call of the SDK was refused (`status` > 0, with the relay's error `code`) or got no answer (`status` 0). */
export class RelayRequestError extends Error {
  /**
   * @param {number} status
   * @param {string | null} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.name = "RelayRequestError";
    this.status = status;
    this.code = code;
  }
}

/** `sendSignal` without an open socket (signals are not queued), or with an invalid signal. */
export class RelaySignalError extends Error {
  /**
   * @param {"notConnected" | "invalid"} kind
   * @param {string} message
   */
  constructor(kind, message) {
    super(message);
    this.name = "RelaySignalError";
    this.kind = kind;
  }
}

// MARK: Backoff

/**
 * Reconnect delays: exponential with full jitter — a uniformly random delay between 0 and
 * `min(cap, base · 2^(attempt−1))` — so that clients cut off together do not return together.
 */
export class Backoff {
  /** @param {{ baseMs?: number, capMs?: number }} [options] */
  constructor(options = {}) {
    this.baseMs = options.baseMs ?? 1000;
    this.capMs = options.capMs ?? 30000;
  }

  /**
   * The largest delay after the `attempt`-th consecutive failure (1-based), in ms.
   * @param {number} attempt
   */
  ceiling(attempt) {
    return Math.min(this.capMs, this.baseMs * 2 ** Math.min(Math.max(attempt - 1, 0), 30));
  }

  /**
   * The delay for `attempt` given `random` in [0, 1], in ms.
   * @param {number} attempt
   * @param {number} random
   */
  delay(attempt, random) {
    return this.ceiling(attempt) * Math.min(Math.max(random, 0), 1);
  }
}

// MARK: Dead-link rule

/**
 * Finds a silently dead connection (no FIN, no RST: a NAT that forgot the mapping, Wi-Fi handing
 * over to cellular). Pure: the caller says what it saw and when.
 *
 * The relay pings after `pingInterval` without a byte from the client. The link counts as dead
 * after `interval × 1.5 + 5 s` without traffic; halfway between the relay's expected ping and
 * that limit the client pings once itself. A browser's WebSocket never shows the relay's pings,
 * so the client's own ping must draw a text frame: `RelayClient` sends a `refresh` frame, which
 * the relay answers with `refreshed`.
 */
export class LinkWatchdog {
  /** The relay's ping interval when its `welcome` does not say (its default), in ms. */
  static defaultPingIntervalMs = 25000;

  /**
   * @param {number} nowMs
   * @param {number} [pingIntervalMs]
   */
  constructor(nowMs, pingIntervalMs = LinkWatchdog.defaultPingIntervalMs) {
    this.lastTraffic = nowMs;
    this.lastCount = 0;
    this.pinged = false;
    /** ms without traffic after which the link is dead */
    this.silenceLimitMs = 0;
    /** ms without traffic after which the client pings */
    this.pingAfterMs = 0;
    this.setPingInterval(pingIntervalMs);
  }

  /**
   * The relay's ping interval from its `welcome` (ms).
   * @param {number} ms
   */
  setPingInterval(ms) {
    const interval = Number.isFinite(ms) && ms > 0 ? ms : LinkWatchdog.defaultPingIntervalMs;
    this.silenceLimitMs = interval * 1.5 + 5000;
    this.pingAfterMs = (interval + this.silenceLimitMs) / 2;
  }

  /** How often to observe: an eighth of the limit, between 250 ms and 5 s. */
  get checkIntervalMs() {
    return Math.min(5000, Math.max(250, this.silenceLimitMs / 8));
  }

  /**
   * `count` grows whenever anything arrived; `nowMs` on a monotonic clock.
   * @param {number} count @param {number} nowMs
   * @returns {"none" | "ping" | "dead"}
   */
  observe(count, nowMs) {
    if (count !== this.lastCount) {
      this.lastCount = count;
      this.lastTraffic = nowMs;
      this.pinged = false;
      return "none";
    }
    const silent = nowMs - this.lastTraffic;
    if (silent >= this.silenceLimitMs) return "dead";
    if (silent >= this.pingAfterMs && !this.pinged) {
      this.pinged = true;
      return "ping";
    }
    return "none";
  }
}

// MARK: The cursor

/**
 * The resume cursor and what the relay's answers do to it. Pure. A message is delivered only when
 * its seq is above the cursor, so each one reaches the app once and in seq order across
 * reconnects and polling; `complete: false` (another epoch, a cursor ahead of the inbox, pruned
 * messages) becomes a resync.
 */
export class CursorTracker {
  /** @param {RelayCursor | null} [cursor] */
  constructor(cursor) {
    /** @type {string | null} */
    this.epoch = cursor?.epoch ?? null;
    this.seq = cursor && Number.isSafeInteger(cursor.seq) && cursor.seq > 0 ? cursor.seq : 0;
    /** The relay could not serve the cursor: the next `synced` sets it, even backwards. */
    this.rebase = false;
  }

  /** @returns {RelayCursor} */
  get cursor() {
    return { epoch: this.epoch, seq: this.seq };
  }

  /**
   * A `welcome` frame, or the first page of a catch-up (same members): the resync to report, if any.
   * @param {{ epoch?: unknown, complete?: unknown, firstAvailableSeq?: unknown, headSeq?: unknown }} head
   * @returns {ResyncReason | null}
   */
  head(head) {
    const epoch = typeof head.epoch === "string" ? head.epoch : null;
    /** @type {ResyncReason | null} */
    let resync = null;
    this.rebase = false;
    if (epoch !== null && this.epoch !== null && epoch !== this.epoch) {
      resync = { reason: "epochChanged", epoch };
      this.seq = 0;
      this.rebase = true;
    } else if (head.complete === false) {
      resync = { reason: "messagesPruned", firstAvailableSeq: numberOr(head.firstAvailableSeq, 0) };
      this.rebase = true;
    }
    if (epoch !== null) this.epoch = epoch;
    return resync;
  }

  /**
   * Whether a message with this seq is new to the app (and if so, it now is the cursor).
   * @param {number} seq
   */
  accept(seq) {
    if (!(seq > this.seq)) return false;
    this.seq = seq;
    this.rebase = false;
    return true;
  }

  /**
   * The relay's `synced` seq (or a last page's `headSeq` after a resync).
   * @param {number} seq
   */
  synced(seq) {
    if (!Number.isSafeInteger(seq)) return;
    if (seq > this.seq || this.rebase) this.seq = seq;
    this.rebase = false;
  }
}

/**
 * @param {unknown} value
 * @param {number} fallback
 */
function numberOr(value, fallback) {
  return typeof value === "number" && Number.isFinite(value) ? value : fallback;
}

// MARK: Cursor stores

/**
 * Keeps the cursor in memory only (the default: a reload starts over from seq 0).
 * @param {RelayCursor | null} [initial]
 * @returns {CursorStore}
 */
export function memoryCursorStore(initial = null) {
  let cursor = initial;
  return {
    load: async () => cursor && { ...cursor },
    save: async (value) => {
      cursor = { ...value };
    },
    clear: async () => {
      cursor = null;
    },
  };
}

/**
 * @param {string | null | undefined} text
 * @returns {RelayCursor | null}
 */
function parseCursor(text) {
  if (!text) return null;
  try {
    const value = JSON.parse(text);
    if (value && typeof value === "object" && Number.isSafeInteger(value.seq)) {
      return { epoch: typeof value.epoch === "string" ? value.epoch : null, seq: value.seq };
    }
  } catch {
    // unreadable: start over
  }
  return null;
}

/**
 * Any storage with `getItem`/`setItem`/`removeItem`, synchronous (`localStorage`) or returning
 * promises (React Native's AsyncStorage and look-alikes). The key should name the user and the
 * device, e.g. `pushrelay:alice:phone`.
 * @param {{ getItem(key: string): any, setItem(key: string, value: string): any, removeItem(key: string): any }} storage
 * @param {string} key
 * @returns {CursorStore}
 */
export function storageCursorStore(storage, key) {
  return {
    load: async () => parseCursor(await storage.getItem(key)),
    save: async (cursor) => {
      await storage.setItem(key, JSON.stringify({ epoch: cursor.epoch, seq: cursor.seq }));
    },
    clear: async () => {
      await storage.removeItem(key);
    },
  };
}

/**
 * The browser's `localStorage` (shared by the tabs of one origin: each tab resumes from the
 * cursor saved last).
 * @param {string} key
 * @param {Storage} [storage]
 * @returns {CursorStore}
 */
export function localStorageCursorStore(key, storage = globalThis.localStorage) {
  return storageCursorStore(storage, key);
}

/**
 * React Native's `AsyncStorage` (or anything with its `getItem`/`setItem`/`removeItem` returning promises).
 * @param {{ getItem(key: string): Promise<string | null>, setItem(key: string, value: string): Promise<void>, removeItem(key: string): Promise<void> }} asyncStorage
 * @param {string} key
 * @returns {CursorStore}
 */
export function asyncStorageCursorStore(asyncStorage, key) {
  return storageCursorStore(asyncStorage, key);
}

/**
 * IndexedDB: database `pushrelay`, object store `cursors`, one record per `key`. Usable in a page
 * and in a service worker.
 * @param {string} key
 * @param {IDBFactory} [factory]
 * @returns {CursorStore}
 */
export function indexedDBCursorStore(key, factory = globalThis.indexedDB) {
  /** @type {Promise<IDBDatabase> | null} */
  let opening = null;
  const open = () => {
    opening ??= new Promise((resolve, reject) => {
      const request = factory.open("pushrelay", 1);
      request.onupgradeneeded = () => {
        request.result.createObjectStore("cursors");
      };
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
    return opening;
  };
  /**
   * @template T
   * @param {IDBTransactionMode} mode
   * @param {(store: IDBObjectStore) => IDBRequest<T>} action
   * @returns {Promise<T>}
   */
  const run = async (mode, action) => {
    const db = await open();
    return new Promise((resolve, reject) => {
      const request = action(db.transaction("cursors", mode).objectStore("cursors"));
      request.onsuccess = () => resolve(request.result);
      request.onerror = () => reject(request.error);
    });
  };
  return {
    load: async () => parseCursor(await run("readonly", (store) => store.get(key))),
    save: async (cursor) => {
      await run("readwrite", (store) => store.put(JSON.stringify(cursor), key));
    },
    clear: async () => {
      await run("readwrite", (store) => store.delete(key));
    },
  };
}

// MARK: Helpers

/**
 * URL-safe base64 (as `/v1/webpush/key` gives it) to bytes.
 * @param {string} text
 */
export function base64UrlToBytes(text) {
  const base64 = text.replace(/-/g, "+").replace(/_/g, "/") + "===".slice((text.length + 3) % 4);
  const binary = atob(base64);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

const SIGNAL_NAME = /^[A-Za-z0-9._:-]{1,64}$/;

/** @param {unknown} error */
function report(error) {
  const reporter = /** @type {any} */ (globalThis).reportError;
  if (typeof reporter === "function") reporter(error);
  else console.error(error);
}

/** @type {Timers} */
const systemTimers = {
  setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
  clearTimeout: (handle) => globalThis.clearTimeout(handle),
  now: () => (globalThis.performance ? globalThis.performance.now() : Date.now()),
};

// MARK: The client

/**
 * The PushRelay client: keeps one WebSocket open while the app is in the foreground, reconnects
 * with backoff and full jitter, resumes from the last message it delivered (each message once,
 * in seq order), polls the catch-up endpoint while no socket can be opened, batches acks, finds
 * dead links from the relay's ping interval, and registers push subscriptions and tokens.
 */
export class RelayClient {
  static version = VERSION;

  /** @type {{ [K in keyof RelayEvents]: Set<RelayEvents[K]> }} */
  #listeners = { message: new Set(), state: new Set(), resync: new Set(), signal: new Set() };
  #url;
  #userId;
  /** @type {string | undefined} */
  #deviceId;
  /** @type {string | undefined} */
  #app;
  #getToken;
  #store;
  /** @type {WebSocketConstructor | undefined} */
  #WebSocket;
  /** @type {FetchLike | undefined} */
  #fetch;
  /** @type {Timers} */
  #timers;
  #random;
  #backoff;
  #stableAfterMs;
  #ackIntervalMs;
  #pollWhenSocketFails;
  #requestTimeoutMs;

  /** @type {CursorTracker | null} null until the store was read */
  #tracker = null;
  /** @type {ConnectionState} */
  #state = "offline";
  /** Bumped by every start and stop: a loop of an older generation ends at its next step. */
  #generation = 0;
  #running = false;
  /** @type {WebSocketLike | null} the open socket */
  #socket = null;
  /** @type {((code: number, reason: string) => void) | null} ends the current socket at once */
  #abandon = null;
  /** @type {{ handle: any, resolve: () => void } | null} the backoff wait */
  #wait = null;
  /** @type {string | null} the last token the relay took */
  #token = null;
  #pendingAck = 0;
  #sentAck = 0;
  /** @type {any} */
  #ackTimer = null;
  /** @type {Promise<void>} saves, one after the other */
  #saving = Promise.resolve();
  /** @type {{ promise: Promise<void>, resolve: () => void, reject: (error: Error) => void, settled: boolean } | null} */
  #firstSync = null;
  /** @type {PushSubscription | null} registered by `enablePush`, withdrawn by `logout` */
  #subscription = null;

  /** @param {RelayClientOptions} options */
  constructor(options) {
    if (!options || typeof options.url !== "string" || typeof options.userId !== "string") {
      throw new TypeError("RelayClient needs { url, userId, getToken }");
    }
    if (typeof options.getToken !== "function") throw new TypeError("RelayClient needs getToken");
    this.#url = options.url.replace(/\/+$/, "");
    this.#userId = options.userId;
    this.#deviceId = options.deviceId;
    this.#app = options.app;
    this.#getToken = options.getToken;
    this.#store = options.cursorStore ?? memoryCursorStore();
    this.#WebSocket = options.WebSocket ?? /** @type {any} */ (globalThis).WebSocket;
    this.#fetch = options.fetch ?? (globalThis.fetch ? (input, init) => globalThis.fetch(input, init) : undefined);
    this.#timers = { ...systemTimers, ...options.timers };
    this.#random = options.random ?? Math.random;
    this.#backoff = new Backoff(options.backoff);
    this.#stableAfterMs = options.stableAfterMs ?? 10000;
    this.#ackIntervalMs = options.ackIntervalMs ?? 250;
    this.#pollWhenSocketFails = options.pollWhenSocketFails ?? true;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? 10000;
  }

  // MARK: Events

  /**
   * Listens to `message` (each once, in seq order), `state`, `resync` or `signal`; returns the
   * function that stops listening.
   * @template {keyof RelayEvents} K
   * @param {K} event
   * @param {RelayEvents[K]} listener
   * @returns {() => void}
   */
  on(event, listener) {
    const set = /** @type {Set<RelayEvents[K]>} */ (this.#listeners[event]);
    if (!set) throw new TypeError(`unknown event ${String(event)}`);
    set.add(listener);
    return () => {
      set.delete(listener);
    };
  }

  /**
   * @template {keyof RelayEvents} K
   * @param {K} event
   * @param {Parameters<RelayEvents[K]>} args
   */
  #emit(event, ...args) {
    for (const listener of [...this.#listeners[event]]) {
      try {
        /** @type {(...a: any[]) => void} */ (listener)(...args);
      } catch (error) {
        report(error);
      }
    }
  }

  /**
   * The current state.
   * @returns {ConnectionState}
   */
  get state() {
    return this.#state;
  }

  /**
   * The cursor: the last seq delivered and its epoch (null before the store was read).
   * @returns {RelayCursor | null}
   */
  get cursor() {
    return this.#tracker ? this.#tracker.cursor : null;
  }

  /**
   * @param {ConnectionState} state
   * @param {StateDetail} [detail]
   */
  #set(state, detail = {}) {
    if (state === this.#state && state !== "waiting") return;
    this.#state = state;
    this.#emit("state", state, detail);
  }

  // MARK: Lifecycle

  /**
   * Starts connecting (and keeps reconnecting) until `close()` or `enterBackground()`. Resolves
   * once the first catch-up is done (on the socket, or over REST when no socket opens); rejects
   * with `RelayAuthError` when the relay refuses a freshly fetched token before that, and with
   * `RelayClosedError` when `close()` comes first.
   * @returns {Promise<void>}
   */
  connect() {
    if (!this.#firstSync) {
      /** @type {any} */
      const deferred = { settled: false };
      deferred.promise = new Promise((resolve, reject) => {
        deferred.resolve = () => {
          deferred.settled = true;
          resolve(undefined);
        };
        deferred.reject = (/** @type {Error} */ error) => {
          deferred.settled = true;
          reject(error);
        };
      });
      this.#firstSync = deferred;
    }
    const promise = /** @type {Promise<void>} */ (/** @type {any} */ (this.#firstSync).promise);
    this.#start();
    return promise;
  }

  #start() {
    if (this.#running) return;
    this.#running = true;
    const generation = ++this.#generation;
    this.#run(generation).catch(report);
  }

  /** Stops reconnecting; sends pending acks, closes the socket, saves the cursor. */
  async #stop() {
    this.#generation++;
    this.#running = false;
    this.#cancelWait();
    await this.#flushAck();
    if (this.#abandon) this.#abandon(1000, "closed");
    if (this.#tracker) this.#save();
    await this.#saving;
    this.#set("offline");
  }

  /**
   * The page or app is not visible: tells the relay (its pushes take over for this socket),
   * sends pending acks and closes the socket. A pending `connect()` stays pending until the
   * first sync after `enterForeground()`.
   */
  async enterBackground() {
    if (this.#socket && this.#socket.readyState === 1) {
      try {
        this.#socket.send('{"type":"background"}');
      } catch {
        // closing anyway
      }
    }
    await this.#stop();
  }

  /** Visible again: reconnects at once (skipping any backoff wait) and catches up. */
  enterForeground() {
    if (this.#running) {
      this.#cancelWait();
    } else {
      this.connect().catch(() => {});
    }
  }

  /** Stops for good (until `connect()`): acks flushed, socket closed, cursor saved. */
  async close() {
    await this.#stop();
    if (this.#firstSync && !this.#firstSync.settled) {
      this.#firstSync.reject(new RelayClosedError());
      this.#firstSync.promise.catch(() => {});
    }
    this.#firstSync = null;
  }

  /**
   * Follows the page's visibility (`visibilitychange`): hidden → `enterBackground()`, visible →
   * `enterForeground()`. Each tab keeps its own socket while it is visible; the relay counts a
   * device online while any of its sockets is open and not backgrounded, so several tabs of one
   * device are in the foreground while any of them is. Returns the function that stops following.
   * @param {Document} [doc]
   * @returns {() => void}
   */
  followVisibility(doc = globalThis.document) {
    const changed = () => {
      if (doc.visibilityState === "hidden") this.enterBackground().catch(report);
      else this.enterForeground();
    };
    doc.addEventListener("visibilitychange", changed);
    return () => doc.removeEventListener("visibilitychange", changed);
  }

  // MARK: Acks and signals

  /**
   * Marks everything up to `seq` as read; sent in batches (the highest seq wins).
   * @param {number} seq
   */
  ack(seq) {
    if (!Number.isSafeInteger(seq) || seq <= 0) return;
    this.#pendingAck = Math.max(this.#pendingAck, seq);
    if (this.#ackTimer !== null) return;
    this.#ackTimer = this.#timers.setTimeout(() => {
      this.#ackTimer = null;
      this.#flushAck().catch(report);
    }, this.#ackIntervalMs);
  }

  async #flushAck() {
    if (this.#ackTimer !== null) {
      this.#timers.clearTimeout(this.#ackTimer);
      this.#ackTimer = null;
    }
    const seq = this.#pendingAck;
    if (seq <= this.#sentAck) return;
    const epoch = this.#tracker?.epoch ?? null;
    const socket = this.#socket;
    if (socket && socket.readyState === 1) {
      try {
        socket.send(JSON.stringify(epoch ? { type: "ack", seq, epoch } : { type: "ack", seq }));
        this.#sentAck = seq;
        return;
      } catch {
        // over REST
      }
    }
    // No socket: acknowledge over REST so that pushes for read messages stop.
    let token;
    try {
      token = await this.#tokenFor(false);
    } catch {
      return;
    }
    const answer = await this.#request("POST", `/v1/users/${encodeURIComponent(this.#userId)}/ack`, token, epoch ? { seq, epoch } : { seq });
    if (answer.status === 204) this.#sentAck = Math.max(this.#sentAck, seq);
  }

  /**
   * Sends a signal (typing…) on the open socket. Live only: throws `RelaySignalError`
   * (`notConnected`) rather than queue it, and (`invalid`) for a bad name or data.
   * @param {{ conversationId: string, name: string, data?: Record<string, unknown> }} signal
   */
  sendSignal(signal) {
    if (!signal || typeof signal.conversationId !== "string" || !SIGNAL_NAME.test(signal.name ?? "")) {
      throw new RelaySignalError("invalid", "a signal needs a conversationId and a name of 1–64 [A-Za-z0-9._:-]");
    }
    /** @type {Record<string, unknown>} */
    const frame = { type: "signal", conversationId: signal.conversationId, name: signal.name };
    if (signal.data !== undefined) {
      if (signal.data === null || typeof signal.data !== "object" || Array.isArray(signal.data)) {
        throw new RelaySignalError("invalid", "a signal's data must be a JSON object");
      }
      frame.data = signal.data;
    }
    const socket = this.#socket;
    if (!socket || socket.readyState !== 1) throw new RelaySignalError("notConnected", "no socket is open");
    socket.send(JSON.stringify(frame));
  }

  // MARK: Push registration

  /**
   * Registers the browser's `PushSubscription` as this device's Web Push transport
   * (`PUT /v1/users/{userId}/devices/{deviceId}` with the client token).
   * @param {PushSubscription | PushSubscriptionJSON} subscription
   * @param {PushOptions} [options]
   */
  async setPushSubscription(subscription, options = {}) {
    const json = "toJSON" in subscription && typeof subscription.toJSON === "function" ? subscription.toJSON() : subscription;
    const { endpoint, keys } = /** @type {PushSubscriptionJSON} */ (json);
    await this.#putDevice({ webPush: { endpoint, keys } }, options);
  }

  /**
   * Registers a native push token from React Native: `{ apns: hexToken, voipToken?, topic?,
   * environment? }` (`voipToken`: the PushKit token, where calls ring) or `{ fcm: registrationToken }`.
   * @param {{ apns: string, voipToken?: string, topic?: string, environment?: "production" | "sandbox" } | { fcm: string }} token
   * @param {PushOptions} [options]
   */
  async setPushToken(token, options = {}) {
    if ("apns" in token && typeof token.apns === "string") {
      /** @type {Record<string, string>} */
      const apns = { token: token.apns };
      // Only what the app named: without an environment the relay tries the sandbox before it
      // gives a development build's token up.
      if (token.environment) apns.environment = token.environment;
      if (token.voipToken) apns.voipToken = token.voipToken;
      if (token.topic) apns.topic = token.topic;
      await this.#putDevice({ apns }, options);
    } else if ("fcm" in token && typeof token.fcm === "string") {
      await this.#putDevice({ fcm: { token: token.fcm } }, options);
    } else {
      throw new TypeError("setPushToken needs { apns } or { fcm }");
    }
  }

  /**
   * Web Push in one call: the relay's VAPID key (`GET /v1/webpush/key`), a subscription from
   * `registration.pushManager` (a subscription for another key is replaced), registered as this
   * device's `webPush` transport. Returns the subscription.
   * @param {ServiceWorkerRegistration} registration
   * @param {PushOptions} [options]
   * @returns {Promise<PushSubscription>}
   */
  async enablePush(registration, options = {}) {
    const query = this.#app ? `?app=${encodeURIComponent(this.#app)}` : "";
    const answer = await this.#request("GET", `/v1/webpush/key${query}`, null, undefined);
    const publicKey = answer.json && typeof answer.json.publicKey === "string" ? answer.json.publicKey : null;
    if (answer.status !== 200 || !publicKey) {
      throw new RelayRequestError(answer.status, answer.code, `no VAPID key from the relay (HTTP ${answer.status})`);
    }
    const applicationServerKey = base64UrlToBytes(publicKey);
    let subscription = await registration.pushManager.getSubscription();
    if (subscription) {
      const current = subscription.options?.applicationServerKey;
      const same = current && equalBytes(new Uint8Array(current), applicationServerKey);
      if (!same) {
        await subscription.unsubscribe();
        subscription = null;
      }
    }
    subscription ??= await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey });
    await this.setPushSubscription(subscription, options);
    this.#subscription = subscription;
    return subscription;
  }

  /**
   * Logs out: closes the client, withdraws the push subscription `enablePush` made (or the
   * `registration`'s), and forgets the cursor. A client token may not delete its device: the chat
   * server deletes it (`DELETE /v1/users/{userId}/devices/{deviceId}` with the server key), which
   * also revokes the device's tokens. Until then, a withdrawn subscription makes the push service
   * answer 404/410 and the relay disables the device at its next push.
   * @param {{ registration?: ServiceWorkerRegistration }} [options]
   */
  async logout(options = {}) {
    await this.close();
    let subscription = this.#subscription;
    if (!subscription && options.registration) subscription = await options.registration.pushManager.getSubscription();
    if (subscription) {
      try {
        await subscription.unsubscribe();
      } catch (error) {
        report(error);
      }
    }
    this.#subscription = null;
    await this.#store.clear();
    this.#tracker = null;
    this.#pendingAck = 0;
    this.#sentAck = 0;
    this.#token = null;
  }

  /**
   * @param {Record<string, unknown>} body
   * @param {PushOptions} options
   */
  async #putDevice(body, options) {
    const deviceId = this.#deviceId;
    if (!deviceId) throw new TypeError("push registration needs the deviceId option");
    // Only what the app set: the relay keeps what the server registered for the rest (a client
    // token's PUT changes what it names).
    const full = {
      ...body,
      ...(options.contentFree !== undefined ? { contentFree: options.contentFree } : {}),
      ...(options.platform !== undefined ? { platform: options.platform } : {}),
      ...(this.#app ? { app: this.#app } : {}),
    };
    const path = `/v1/users/${encodeURIComponent(this.#userId)}/devices/${encodeURIComponent(deviceId)}`;
    for (const forceRefresh of [false, true]) {
      const token = await this.#tokenFor(forceRefresh);
      const answer = await this.#request("PUT", path, token, full);
      if (answer.status === 200 || answer.status === 201) return;
      if (answer.status === 401 && !forceRefresh) continue; // an expired token: once more with a fresh one
      throw new RelayRequestError(
        answer.status,
        answer.code,
        answer.status === 0 ? "the relay could not be reached" : `the relay refused the device (HTTP ${answer.status} ${answer.code ?? ""})`,
      );
    }
  }

  // MARK: The connection loop

  /** @param {boolean} forceRefresh */
  async #tokenFor(forceRefresh) {
    if (!forceRefresh && this.#token) return this.#token;
    const token = await this.#getToken({ forceRefresh });
    if (typeof token !== "string" || token === "") throw new TypeError("getToken must return a token");
    this.#token = token;
    return token;
  }

  /** @param {number} generation */
  async #run(generation) {
    const alive = () => generation === this.#generation;
    if (!this.#tracker) {
      let saved = null;
      try {
        saved = await this.#store.load();
      } catch (error) {
        report(error);
      }
      if (!alive()) return;
      this.#tracker ??= new CursorTracker(saved);
    }
    let attempt = 0;
    let refresh = false;
    while (alive()) {
      this.#set("connecting");
      /** @type {{ opened: boolean, code: number, openedAt: number } | null} */
      let outcome = null;
      /** @type {string | null} */
      let token = null;
      const refreshed = refresh;
      try {
        token = await this.#tokenFor(refresh);
        refresh = false;
        if (!alive()) return;
        outcome = await this.#session(token, alive);
      } catch (error) {
        // The token provider failed, or no WebSocket here: wait and try again.
        if (!this.#WebSocket) report(error);
      }
      if (!alive()) return;
      this.#save();
      if (outcome?.opened && this.#timers.now() - outcome.openedAt >= this.#stableAfterMs) attempt = 0;
      attempt += 1;
      if (outcome?.code === 1008) refresh = true; // policy: most often an expired token
      if (outcome && !outcome.opened && token !== null) {
        // A browser never sees why an upgrade was refused: ask the REST API, which catches up too.
        const probe = await this.#poll(token, alive);
        if (!alive()) return;
        if (probe === "refused") {
          this.#token = null;
          if (refreshed && this.#firstSync && !this.#firstSync.settled) {
            this.#firstSync.reject(new RelayAuthError(401));
            this.#firstSync.promise.catch(() => {});
            this.#firstSync = null;
            this.#generation++;
            this.#running = false;
            this.#set("offline");
            return;
          }
          refresh = true;
        }
      }
      const delay = this.#backoff.delay(attempt, this.#random());
      this.#set("waiting", { retryInMs: delay });
      await new Promise((resolve) => {
        const handle = this.#timers.setTimeout(() => {
          this.#wait = null;
          resolve(undefined);
        }, delay);
        this.#wait = { handle, resolve: () => resolve(undefined) };
      });
    }
  }

  #cancelWait() {
    const wait = this.#wait;
    if (!wait) return;
    this.#wait = null;
    this.#timers.clearTimeout(wait.handle);
    wait.resolve();
  }

  #webSocketURL() {
    const base = this.#url.replace(/^http/i, "ws");
    const tracker = /** @type {CursorTracker} */ (this.#tracker);
    const query = [`after=${tracker.seq}`];
    if (tracker.epoch) query.push(`epoch=${encodeURIComponent(tracker.epoch)}`);
    if (this.#deviceId) query.push(`deviceId=${encodeURIComponent(this.#deviceId)}`);
    // A browser cannot send headers on a WebSocket: the token goes in the query.
    query.push(`access_token=${encodeURIComponent(/** @type {string} */ (this.#token))}`);
    return `${base}/v1/ws?${query.join("&")}`;
  }

  /**
   * One socket, from opening to its end. Resolves (never rejects) with whether it opened and its close code.
   * @param {string} token @param {() => boolean} alive
   * @returns {Promise<{ opened: boolean, code: number, openedAt: number }>}
   */
  #session(token, alive) {
    const WS = this.#WebSocket;
    if (!WS) return Promise.reject(new TypeError("no WebSocket: pass the WebSocket option"));
    return new Promise((resolve) => {
      const timers = this.#timers;
      void token;
      const ws = new WS(this.#webSocketURL());
      let opened = false;
      let openedAt = 0;
      let finished = false;
      let frames = 0;
      let watchdog = new LinkWatchdog(timers.now());
      /** @type {any} */
      let check = null;
      /** @param {number} code */
      const finish = (code) => {
        if (finished) return;
        finished = true;
        timers.clearTimeout(openTimer);
        if (check !== null) timers.clearTimeout(check);
        ws.onopen = ws.onmessage = ws.onerror = ws.onclose = null;
        if (this.#socket === ws) this.#socket = null;
        if (this.#abandon === abandon) this.#abandon = null;
        resolve({ opened, code, openedAt });
      };
      /**
       * @param {number} code
       * @param {string} reason
       */
      const abandon = (code, reason) => {
        if (finished) return;
        finish(code); // first: what the close fires now or later goes nowhere
        try {
          ws.close(1000, reason);
        } catch {
          // gone already
        }
      };
      this.#abandon = abandon;
      const openTimer = timers.setTimeout(() => abandon(1006, "open timed out"), this.#requestTimeoutMs);
      let every = 0;
      const watch = () => {
        every = watchdog.checkIntervalMs;
        check = timers.setTimeout(() => {
          check = null;
          if (finished) return;
          const action = watchdog.observe(frames, timers.now());
          if (action === "dead") return abandon(1006, "dead link");
          if (action === "ping" && this.#token) {
            // The WebSocket API cannot ping; `refresh` is the frame the relay answers.
            try {
              ws.send(JSON.stringify({ type: "refresh", token: this.#token }));
            } catch {
              // the close follows
            }
          }
          watch();
        }, every);
      };
      ws.onopen = () => {
        if (!alive()) return abandon(1000, "stopped");
        opened = true;
        openedAt = timers.now();
        timers.clearTimeout(openTimer);
        this.#socket = ws;
        watchdog = new LinkWatchdog(openedAt);
        this.#set("syncing");
        watch();
      };
      ws.onmessage = (event) => {
        frames += 1;
        watchdog.observe(frames, timers.now());
        if (typeof event.data === "string") this.#frame(event.data, watchdog);
        if (!finished && check !== null && watchdog.checkIntervalMs !== every) {
          // The welcome's ping interval: check at its pace from now on.
          timers.clearTimeout(check);
          watch();
        }
      };
      ws.onclose = (event) => finish(event && typeof event.code === "number" ? event.code : 1006);
      ws.onerror = () => {
        // A close follows in browsers; some WebSockets (Node's undici) skip it for a failed
        // opening, so that ends the attempt here.
        if (!opened) abandon(1006, "failed to open");
      };
    });
  }

  /**
   * @param {string} text
   * @param {LinkWatchdog} watchdog
   */
  #frame(text, watchdog) {
    /** @type {any} */
    let frame;
    try {
      frame = JSON.parse(text);
    } catch {
      return;
    }
    if (!frame || typeof frame !== "object") return;
    const tracker = /** @type {CursorTracker} */ (this.#tracker);
    switch (frame.type) {
      case "welcome": {
        const before = tracker.epoch;
        const resync = tracker.head(frame);
        if (before !== null && tracker.epoch !== before) this.#pendingAck = this.#sentAck = 0;
        if (typeof frame.pingIntervalMs === "number") watchdog.setPingInterval(frame.pingIntervalMs);
        if (resync) this.#emit("resync", resync);
        break;
      }
      case "message":
        this.#deliver(frame);
        break;
      case "signal":
        if (typeof frame.conversationId === "string" && typeof frame.name === "string") {
          /** @type {RelaySignal} */
          const signal = { conversationId: frame.conversationId, name: frame.name };
          if (typeof frame.senderId === "string") signal.senderId = frame.senderId;
          if (frame.data && typeof frame.data === "object") signal.data = frame.data;
          this.#emit("signal", signal);
        }
        break;
      case "synced":
        tracker.synced(frame.seq);
        this.#save();
        this.#set("live");
        this.#firstSync?.resolve();
        if (this.#pendingAck > this.#sentAck) this.#flushAck().catch(report);
        break;
      default:
        break; // `refreshed` and types of newer relays
    }
  }

  /**
   * Hands a message to the app once: anything at or below the cursor was delivered already.
   * @param {any} object
   */
  #deliver(object) {
    if (!Number.isSafeInteger(object.seq) || typeof object.id !== "string") return;
    const tracker = /** @type {CursorTracker} */ (this.#tracker);
    if (!tracker.accept(object.seq)) return;
    const { type, ...message } = object;
    void type;
    this.#emit("message", /** @type {RelayMessage} */ (message));
    if (object.seq % 100 === 0) this.#save();
  }

  #save() {
    const store = this.#store;
    if (!this.#tracker) return;
    const cursor = this.#tracker.cursor;
    this.#saving = this.#saving.then(() => store.save(cursor)).catch(report);
  }

  /**
   * One catch-up over REST, page by page (while no socket opens); also how a refused token is
   * told from network trouble.
   * @param {string} token @param {() => boolean} alive
   * @returns {Promise<"ok" | "refused" | "unreachable">}
   */
  async #poll(token, alive) {
    const tracker = /** @type {CursorTracker} */ (this.#tracker);
    let first = true;
    for (;;) {
      const query = [`after=${tracker.seq}`, `limit=${this.#pollWhenSocketFails ? 500 : 1}`];
      if (tracker.epoch) query.push(`epoch=${encodeURIComponent(tracker.epoch)}`);
      const answer = await this.#request("GET", `/v1/users/${encodeURIComponent(this.#userId)}/messages?${query.join("&")}`, token, undefined);
      if (!alive()) return "ok";
      if (answer.status === 401 || answer.status === 403) return "refused";
      if (answer.status !== 200 || !answer.json) return "unreachable";
      if (!this.#pollWhenSocketFails) return "ok"; // a probe only
      const page = answer.json;
      if (first) {
        const before = tracker.epoch;
        const resync = tracker.head(page);
        if (before !== null && tracker.epoch !== before) this.#pendingAck = this.#sentAck = 0;
        if (resync) this.#emit("resync", resync);
        first = false;
      }
      const messages = Array.isArray(page.messages) ? page.messages : [];
      for (const message of messages) this.#deliver(message);
      if (page.hasMore !== true) {
        if (messages.length === 0 && typeof page.headSeq === "number") tracker.synced(page.headSeq);
        this.#save();
        this.#firstSync?.resolve();
        return "ok";
      }
    }
  }

  /**
   * One JSON request with a deadline; status 0 when no answer came.
   * @param {string} method @param {string} path @param {string | null} token @param {unknown} body
   * @returns {Promise<{ status: number, json: any, code: string | null }>}
   */
  async #request(method, path, token, body) {
    const fetchFn = this.#fetch;
    if (!fetchFn) return { status: 0, json: null, code: null };
    const controller = typeof AbortController === "function" ? new AbortController() : null;
    const timer = this.#timers.setTimeout(() => controller?.abort(), this.#requestTimeoutMs);
    /** @type {Record<string, string>} */
    const headers = {};
    if (token) headers.Authorization = `Bearer ${token}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    try {
      const response = await fetchFn(this.#url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: controller?.signal,
      });
      const text = await response.text();
      let json = null;
      try {
        json = text ? JSON.parse(text) : null;
      } catch {
        json = null;
      }
      const code = json && json.error && typeof json.error.code === "string" ? json.error.code : null;
      return { status: response.status, json, code };
    } catch {
      return { status: 0, json: null, code: null };
    } finally {
      this.#timers.clearTimeout(timer);
    }
  }
}

/**
 * @param {Uint8Array} a
 * @param {Uint8Array} b
 */
function equalBytes(a, b) {
  return a.length === b.length && a.every((byte, i) => byte === b[i]);
}
