/**
 * Keeps the cursor in memory only (the default: a reload starts over from seq 0).
 * @param {RelayCursor | null} [initial]
 * @returns {CursorStore}
 */
export function memoryCursorStore(initial?: RelayCursor | null | undefined): CursorStore;
/**
 * Any storage with `getItem`/`setItem`/`removeItem`, synchronous (`localStorage`) or returning
 * promises (React Native's AsyncStorage and look-alikes). The key should name the user and the
 * device, e.g. `pushrelay:alice:phone`.
 * @param {{ getItem(key: string): any, setItem(key: string, value: string): any, removeItem(key: string): any }} storage
 * @param {string} key
 * @returns {CursorStore}
 */
export function storageCursorStore(storage: {
    getItem(key: string): any;
    setItem(key: string, value: string): any;
    removeItem(key: string): any;
}, key: string): CursorStore;
/**
 * The browser's `localStorage` (shared by the tabs of one origin: each tab resumes from the
 * cursor saved last).
 * @param {string} key
 * @param {Storage} [storage]
 * @returns {CursorStore}
 */
export function localStorageCursorStore(key: string, storage?: Storage | undefined): CursorStore;
/**
 * React Native's `AsyncStorage` (or anything with its `getItem`/`setItem`/`removeItem` returning promises).
 * @param {{ getItem(key: string): Promise<string | null>, setItem(key: string, value: string): Promise<void>, removeItem(key: string): Promise<void> }} asyncStorage
 * @param {string} key
 * @returns {CursorStore}
 */
export function asyncStorageCursorStore(asyncStorage: {
    getItem(key: string): Promise<string | null>;
    setItem(key: string, value: string): Promise<void>;
    removeItem(key: string): Promise<void>;
}, key: string): CursorStore;
/**
 * IndexedDB: database `pushrelay`, object store `cursors`, one record per `key`. Usable in a page
 * and in a service worker.
 * @param {string} key
 * @param {IDBFactory} [factory]
 * @returns {CursorStore}
 */
export function indexedDBCursorStore(key: string, factory?: IDBFactory | undefined): CursorStore;
/**
 * URL-safe base64 (as `/v1/webpush/key` gives it) to bytes.
 * @param {string} text
 */
export function base64UrlToBytes(text: string): Uint8Array;
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
export const VERSION: "0.3.0";
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
/** The relay refused the credential, also when freshly fetched (`connect()` rejects with it). */
export class RelayAuthError extends Error {
    /**
     * @param {number} status
     * @param {string} [message]
     */
    constructor(status: number, message?: string | undefined);
    status: number;
}
/** `close()` or `logout()` was called before the first sync (`connect()` rejects with it). */
export class RelayClosedError extends Error {
    constructor();
}
/** A REST call of the SDK was refused (`status` > 0, with the relay's error `code`) or got no answer (`status` 0). */
export class RelayRequestError extends Error {
    /**
     * @param {number} status
     * @param {string | null} code
     * @param {string} message
     */
    constructor(status: number, code: string | null, message: string);
    status: number;
    code: string | null;
}
/** `sendSignal` without an open socket (signals are not queued), or with an invalid signal. */
export class RelaySignalError extends Error {
    /**
     * @param {"notConnected" | "invalid"} kind
     * @param {string} message
     */
    constructor(kind: "notConnected" | "invalid", message: string);
    kind: "invalid" | "notConnected";
}
/**
 * Reconnect delays: exponential with full jitter — a uniformly random delay between 0 and
 * `min(cap, base · 2^(attempt−1))` — so that clients cut off together do not return together.
 */
export class Backoff {
    /** @param {{ baseMs?: number, capMs?: number }} [options] */
    constructor(options?: {
        baseMs?: number | undefined;
        capMs?: number | undefined;
    } | undefined);
    baseMs: number;
    capMs: number;
    /**
     * The largest delay after the `attempt`-th consecutive failure (1-based), in ms.
     * @param {number} attempt
     */
    ceiling(attempt: number): number;
    /**
     * The delay for `attempt` given `random` in [0, 1], in ms.
     * @param {number} attempt
     * @param {number} random
     */
    delay(attempt: number, random: number): number;
}
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
    static defaultPingIntervalMs: number;
    /**
     * @param {number} nowMs
     * @param {number} [pingIntervalMs]
     */
    constructor(nowMs: number, pingIntervalMs?: number | undefined);
    lastTraffic: number;
    lastCount: number;
    pinged: boolean;
    /** ms without traffic after which the link is dead */
    silenceLimitMs: number;
    /** ms without traffic after which the client pings */
    pingAfterMs: number;
    /**
     * The relay's ping interval from its `welcome` (ms).
     * @param {number} ms
     */
    setPingInterval(ms: number): void;
    /** How often to observe: an eighth of the limit, between 250 ms and 5 s. */
    get checkIntervalMs(): number;
    /**
     * `count` grows whenever anything arrived; `nowMs` on a monotonic clock.
     * @param {number} count @param {number} nowMs
     * @returns {"none" | "ping" | "dead"}
     */
    observe(count: number, nowMs: number): "none" | "ping" | "dead";
}
/**
 * The resume cursor and what the relay's answers do to it. Pure. A message is delivered only when
 * its seq is above the cursor, so each one reaches the app once and in seq order across
 * reconnects and polling; `complete: false` (another epoch, a cursor ahead of the inbox, pruned
 * messages) becomes a resync.
 */
export class CursorTracker {
    /** @param {RelayCursor | null} [cursor] */
    constructor(cursor?: RelayCursor | null | undefined);
    /** @type {string | null} */
    epoch: string | null;
    seq: number;
    /** The relay could not serve the cursor: the next `synced` sets it, even backwards. */
    rebase: boolean;
    /** @returns {RelayCursor} */
    get cursor(): RelayCursor;
    /**
     * A `welcome` frame, or the first page of a catch-up (same members): the resync to report, if any.
     * @param {{ epoch?: unknown, complete?: unknown, firstAvailableSeq?: unknown, headSeq?: unknown }} head
     * @returns {ResyncReason | null}
     */
    head(head: {
        epoch?: unknown;
        complete?: unknown;
        firstAvailableSeq?: unknown;
        headSeq?: unknown;
    }): ResyncReason | null;
    /**
     * Whether a message with this seq is new to the app (and if so, it now is the cursor).
     * @param {number} seq
     */
    accept(seq: number): boolean;
    /**
     * The relay's `synced` seq (or a last page's `headSeq` after a resync).
     * @param {number} seq
     */
    synced(seq: number): void;
}
/**
 * The PushRelay client: keeps one WebSocket open while the app is in the foreground, reconnects
 * with backoff and full jitter, resumes from the last message it delivered (each message once,
 * in seq order), polls the catch-up endpoint while no socket can be opened, batches acks, finds
 * dead links from the relay's ping interval, and registers push subscriptions and tokens.
 */
export class RelayClient {
    static version: string;
    /** @param {RelayClientOptions} options */
    constructor(options: RelayClientOptions);
    /**
     * Listens to `message` (each once, in seq order), `state`, `resync` or `signal`; returns the
     * function that stops listening.
     * @template {keyof RelayEvents} K
     * @param {K} event
     * @param {RelayEvents[K]} listener
     * @returns {() => void}
     */
    on<K extends keyof RelayEvents>(event: K, listener: RelayEvents[K]): () => void;
    /**
     * The current state.
     * @returns {ConnectionState}
     */
    get state(): ConnectionState;
    /**
     * The cursor: the last seq delivered and its epoch (null before the store was read).
     * @returns {RelayCursor | null}
     */
    get cursor(): RelayCursor | null;
    /**
     * Starts connecting (and keeps reconnecting) until `close()` or `enterBackground()`. Resolves
     * once the first catch-up is done (on the socket, or over REST when no socket opens); rejects
     * with `RelayAuthError` when the relay refuses a freshly fetched token before that, and with
     * `RelayClosedError` when `close()` comes first.
     * @returns {Promise<void>}
     */
    connect(): Promise<void>;
    /**
     * The page or app is not visible: tells the relay (its pushes take over for this socket),
     * sends pending acks and closes the socket. A pending `connect()` stays pending until the
     * first sync after `enterForeground()`.
     */
    enterBackground(): Promise<void>;
    /** Visible again: reconnects at once (skipping any backoff wait) and catches up. */
    enterForeground(): void;
    /** Stops for good (until `connect()`): acks flushed, socket closed, cursor saved. */
    close(): Promise<void>;
    /**
     * Follows the page's visibility (`visibilitychange`): hidden → `enterBackground()`, visible →
     * `enterForeground()`. Each tab keeps its own socket while it is visible; the relay counts a
     * device online while any of its sockets is open and not backgrounded, so several tabs of one
     * device are in the foreground while any of them is. Returns the function that stops following.
     * @param {Document} [doc]
     * @returns {() => void}
     */
    followVisibility(doc?: Document | undefined): () => void;
    /**
     * Marks everything up to `seq` as read; sent in batches (the highest seq wins).
     * @param {number} seq
     */
    ack(seq: number): void;
    /**
     * Sends a signal (typing…) on the open socket. Live only: throws `RelaySignalError`
     * (`notConnected`) rather than queue it, and (`invalid`) for a bad name or data.
     * @param {{ conversationId: string, name: string, data?: Record<string, unknown> }} signal
     */
    sendSignal(signal: {
        conversationId: string;
        name: string;
        data?: Record<string, unknown>;
    }): void;
    /**
     * Registers the browser's `PushSubscription` as this device's Web Push transport
     * (`PUT /v1/users/{userId}/devices/{deviceId}` with the client token).
     * @param {PushSubscription | PushSubscriptionJSON} subscription
     * @param {PushOptions} [options]
     */
    setPushSubscription(subscription: PushSubscription | PushSubscriptionJSON, options?: PushOptions | undefined): Promise<void>;
    /**
     * Registers a native push token from React Native: `{ apns: hexToken, voipToken?, topic?,
     * environment? }` (`voipToken`: the PushKit token, where calls ring) or `{ fcm: registrationToken }`.
     * @param {{ apns: string, voipToken?: string, topic?: string, environment?: "production" | "sandbox" } | { fcm: string }} token
     * @param {PushOptions} [options]
     */
    setPushToken(token: {
        apns: string;
        voipToken?: string;
        topic?: string;
        environment?: "production" | "sandbox";
    } | {
        fcm: string;
    }, options?: PushOptions | undefined): Promise<void>;
    /**
     * Web Push in one call: the relay's VAPID key (`GET /v1/webpush/key`), a subscription from
     * `registration.pushManager` (a subscription for another key is replaced), registered as this
     * device's `webPush` transport. Returns the subscription.
     * @param {ServiceWorkerRegistration} registration
     * @param {PushOptions} [options]
     * @returns {Promise<PushSubscription>}
     */
    enablePush(registration: ServiceWorkerRegistration, options?: PushOptions | undefined): Promise<PushSubscription>;
    /**
     * Logs out: closes the client, withdraws the push subscription `enablePush` made (or the
     * `registration`'s), and forgets the cursor. A client token may not delete its device: the chat
     * server deletes it (`DELETE /v1/users/{userId}/devices/{deviceId}` with the server key), which
     * also revokes the device's tokens. Until then, a withdrawn subscription makes the push service
     * answer 404/410 and the relay disables the device at its next push.
     * @param {{ registration?: ServiceWorkerRegistration }} [options]
     */
    logout(options?: {
        registration?: ServiceWorkerRegistration | undefined;
    } | undefined): Promise<void>;
    #private;
}
/**
 * The last message the app has and the inbox it belongs to.
 */
export type RelayCursor = {
    epoch: string | null;
    seq: number;
};
/**
 * Where the client keeps its resume cursor, so that a reloaded page or a restarted app resumes
 * where it was. Every method may return a promise.
 */
export type CursorStore = {
    /**
     * the saved cursor, or null
     */
    load: () => Promise<RelayCursor | null> | RelayCursor | null;
    /**
     * keeps the cursor
     */
    save: (cursor: RelayCursor) => Promise<void> | void;
    /**
     * forgets it (logout)
     */
    clear: () => Promise<void> | void;
};
/**
 * One message of the user's inbox: every member of the relay's `message` frame but `type`
 * (`payload` parsed from JSON).
 */
export type RelayMessage = {
    /**
     * the per-user sequence number (the resume cursor)
     */
    seq: number;
    /**
     * the chat server's message id
     */
    id: string;
    conversationId?: string | undefined;
    senderId?: string | undefined;
    /**
     * the chat server's payload, parsed
     */
    payload: unknown;
    /**
     * RFC 3339 time the relay accepted it
     */
    createdAt: string;
};
/**
 * A signal (typing…), received or to send. Live only: never stored, never replayed.
 */
export type RelaySignal = {
    conversationId: string;
    /**
     * 1–64 of `A–Z a–z 0–9 . _ : -`
     */
    name: string;
    /**
     * who sent it (received signals only)
     */
    senderId?: string | undefined;
    /**
     * an optional JSON object, at most 1 KiB
     */
    data?: Record<string, unknown> | undefined;
};
/**
 * Why the app must resynchronize from its chat server.
 */
export type ResyncReason = {
    reason: "epochChanged";
    epoch: string;
} | {
    reason: "messagesPruned";
    firstAvailableSeq: number;
};
/**
 * The Swift SDK's state names: `connecting`, `syncing` (connected, receiving what was missed),
 * `live`, `waiting` (the next attempt in `retryInMs`), `offline` (not trying).
 */
export type ConnectionState = "connecting" | "syncing" | "live" | "waiting" | "offline";
/**
 * What a `state` listener gets beside the state.
 */
export type StateDetail = {
    retryInMs?: number;
};
export type RelayEvents = {
    message: (message: RelayMessage) => void;
    state: (state: ConnectionState, detail: StateDetail) => void;
    resync: (reason: ResyncReason) => void;
    signal: (signal: RelaySignal) => void;
};
/**
 * The part of a WebSocket the client uses (the browser's, React Native's, Node's with
 * `--experimental-websocket`, or any object that behaves the same way).
 */
export type WebSocketLike = {
    /**
     * 1 while open
     */
    readyState: number;
    send: (data: string) => void;
    close: (code?: number, reason?: string) => void;
    onopen: ((event: any) => void) | null;
    /**
     * the client reads `event.data` (text frames)
     */
    onmessage: ((event: any) => void) | null;
    /**
     * the client reads `event.code`
     */
    onclose: ((event: any) => void) | null;
    onerror: ((event: any) => void) | null;
};
export type WebSocketConstructor = new (url: string) => WebSocketLike;
/**
 * What a push registration may say besides the token; left out, the relay keeps what the server
 * registered (`contentFree`, `platform`).
 */
export type PushOptions = {
    contentFree?: boolean;
    platform?: string;
};
/**
 * Time, injectable so that tests run the schedule without waiting for it. `now` is a monotonic
 * clock in milliseconds.
 */
export type Timers = {
    setTimeout: (fn: () => void, ms: number) => any;
    clearTimeout: (handle: any) => void;
    now: () => number;
};
export type FetchLike = (input: string, init?: any) => Promise<{
    status: number;
    text(): Promise<string>;
}>;
export type RelayClientOptions = {
    /**
     * the relay's base URL, `http(s)://host:port`
     */
    url: string;
    /**
     * the user whose inbox this is (the token's `sub`)
     */
    userId: string;
    /**
     * this device (required for tokens without `did`, and for push registration)
     */
    deviceId?: string | undefined;
    /**
     *   returns a client token; `forceRefresh` is true after the relay refused the last one
     */
    getToken: (options: {
        forceRefresh: boolean;
    }) => Promise<string> | string;
    /**
     * the app this device belongs to, passed along with push registration
     * and the VAPID key request (for relays that serve several apps)
     */
    app?: string | undefined;
    /**
     * where the cursor is kept (default: memory only)
     */
    cursorStore?: CursorStore | undefined;
    /**
     * default: `globalThis.WebSocket`
     */
    WebSocket?: WebSocketConstructor | undefined;
    /**
     * default: `globalThis.fetch`
     */
    fetch?: FetchLike | undefined;
    /**
     * default: the global timers and `performance.now()`
     */
    timers?: Partial<Timers> | undefined;
    /**
     * jitter source in [0, 1] (default `Math.random`)
     */
    random?: (() => number) | undefined;
    /**
     * reconnect delays (default 1 s, 30 s)
     */
    backoff?: {
        baseMs?: number | undefined;
        capMs?: number | undefined;
    } | undefined;
    /**
     * a connection up this long resets the backoff (10 s)
     */
    stableAfterMs?: number | undefined;
    /**
     * acks are sent at most this often (250 ms)
     */
    ackIntervalMs?: number | undefined;
    /**
     * poll the catch-up endpoint while no socket opens (true)
     */
    pollWhenSocketFails?: boolean | undefined;
    /**
     * each HTTP request of the SDK, and each socket's opening (10 s)
     */
    requestTimeoutMs?: number | undefined;
};
