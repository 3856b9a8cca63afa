// @ts-check
/// <reference lib="webworker" />
/**
 * PushRelay's service worker helper: a classic script, so that any service worker can take it
 * with `importScripts` (module service workers can `import "./pushrelay-sw.js"` for its side
 * effect too: it only defines `self.PushRelaySW`).
 *
 *     // sw.js
 *     importScripts("/pushrelay-sw.js");
 *     PushRelaySW.install({ genericTitle: "New message", url: "/" });
 *
 * What it does with the relay's Web Push (the decrypted payload is the webhook's JSON: `{type,
 * userId, deviceId, messageId?, seq: {from, to}, unread, priority, collapseKey, push?}`):
 * - `message`: shows `push.title` / `push.body`, or the generic text for a content-free device
 *   (no `push` member) or a message without text; one notification per user (tag
 *   `pushrelay:<userId>`, replaced by the next); nothing while a window of the app is focused
 *   (the page has the message on its socket);
 * - `clear`: closes that user's notification when it covers no seq above the clear's;
 * - both: sets the app badge to `unread` (cleared at 0) where the Badging API exists;
 * - a click focuses a window of the app (and posts it `{type: "pushrelay.click", push}`), or
 *   opens `url`.
 * Versioned with the relay and pushrelay.js (see clients/js/README.md).
 */

/**
 * The relay's Web Push payload.
 * @typedef {object} RelayPush
 * @property {"message" | "clear"} type
 * @property {string} userId
 * @property {string} deviceId
 * @property {string} [messageId]
 * @property {{ from: number, to: number }} seq
 * @property {number} unread
 * @property {string} [priority]
 * @property {string | null} [collapseKey]
 * @property {{ title?: string, body?: string, data?: unknown } | null} [push]
 */

/**
 * @typedef {object} PushRelaySWOptions
 * @property {string} [url] the page a click opens when no window of the app is open (default: the worker's scope)
 * @property {string} [genericTitle] the title of content-free pushes and pushes without text ("New message")
 * @property {string} [genericBody] their body ("")
 * @property {string} [icon] passed to `showNotification`
 * @property {string} [badge] passed to `showNotification` (the small monochrome image)
 * @property {boolean} [showWhenFocused] show even while a window of the app is focused (false)
 */

(function (scope) {
  const worker = /** @type {ServiceWorkerGlobalScope} */ (/** @type {unknown} */ (scope));

  /**
   * Whether `value` is a push of the relay (other pushes are left to the worker's other handlers).
   * @param {any} value
   * @returns {value is RelayPush}
   */
  function isRelayPush(value) {
    return (
      value !== null && typeof value === "object" && (value.type === "message" || value.type === "clear") &&
      typeof value.userId === "string" && value.seq !== null && typeof value.seq === "object"
    );
  }

  /**
   * The notification a `message` push shows: its title and `showNotification` options. Pure.
   * @param {RelayPush} push
   * @param {PushRelaySWOptions} [options]
   * @returns {{ title: string, options: NotificationOptions }}
   */
  function notificationFor(push, options = {}) {
    const text = push.push && typeof push.push === "object" ? push.push : null;
    const hasText = !!text && (typeof text.title === "string" || typeof text.body === "string");
    const title = hasText && text && typeof text.title === "string" && text.title !== "" ? text.title : options.genericTitle ?? "New message";
    const body = hasText && text && typeof text.body === "string" ? text.body : options.genericBody ?? "";
    /** @type {NotificationOptions & { renotify?: boolean }} */
    const shown = {
      body,
      tag: tagFor(push.userId),
      renotify: true,
      data: { pushrelay: push },
    };
    if (options.icon) shown.icon = options.icon;
    if (options.badge) shown.badge = options.badge;
    return { title, options: shown };
  }

  /** @param {string} userId */
  function tagFor(userId) {
    return `pushrelay:${userId}`;
  }

  /** Whether a window of this app has the focus. */
  async function windowFocused() {
    const windows = await worker.clients.matchAll({ type: "window", includeUncontrolled: true });
    return windows.some((client) => /** @type {WindowClient} */ (client).focused);
  }

  /** @param {number} unread */
  async function setBadge(unread) {
    const nav = /** @type {{ setAppBadge?: (n?: number) => Promise<void>, clearAppBadge?: () => Promise<void> }} */ (
      /** @type {unknown} */ (worker.navigator)
    );
    if (typeof nav.setAppBadge !== "function") return;
    try {
      if (unread > 0) await nav.setAppBadge(unread);
      else if (typeof nav.clearAppBadge === "function") await nav.clearAppBadge();
      else await nav.setAppBadge(0);
    } catch {
      // not allowed here (no installed app): no badge
    }
  }

  /**
   * What the helper does with one relay push.
   * @param {RelayPush} push
   * @param {PushRelaySWOptions} [options]
   */
  async function handlePush(push, options = {}) {
    if (typeof push.unread === "number") await setBadge(push.unread);
    if (push.type === "clear") {
      const shown = await worker.registration.getNotifications({ tag: tagFor(push.userId) });
      for (const notification of shown) {
        const covered = notification.data && notification.data.pushrelay;
        if (!covered || !covered.seq || covered.seq.to <= push.seq.to) notification.close();
      }
      return;
    }
    if (!options.showWhenFocused && (await windowFocused())) return;
    const { title, options: shown } = notificationFor(push, options);
    await worker.registration.showNotification(title, shown);
  }

  /**
   * A click on one of the helper's notifications: focus a window of the app, or open one.
   * @param {NotificationEvent} event
   * @param {PushRelaySWOptions} [options]
   */
  async function handleClick(event, options = {}) {
    event.notification.close();
    const push = event.notification.data && event.notification.data.pushrelay;
    const windows = /** @type {readonly WindowClient[]} */ (
      await worker.clients.matchAll({ type: "window", includeUncontrolled: true })
    );
    const target = windows.find((client) => client.focused) ?? windows[0];
    if (target) {
      target.postMessage({ type: "pushrelay.click", push });
      await target.focus();
      return;
    }
    await worker.clients.openWindow(options.url ?? worker.registration.scope);
  }

  /**
   * Adds the `push` and `notificationclick` listeners.
   * @param {PushRelaySWOptions} [options]
   */
  function install(options = {}) {
    worker.addEventListener("push", (event) => {
      /** @type {unknown} */
      let payload = null;
      try {
        payload = event.data ? event.data.json() : null;
      } catch {
        return; // not JSON: not the relay's
      }
      if (isRelayPush(payload)) event.waitUntil(handlePush(payload, options));
    });
    worker.addEventListener("notificationclick", (event) => {
      const data = event.notification.data;
      if (data && isRelayPush(data.pushrelay)) event.waitUntil(handleClick(event, options));
    });
  }

  /** @type {any} */ (scope).PushRelaySW = { install, handlePush, handleClick, notificationFor, isRelayPush, tagFor };
})(self);
