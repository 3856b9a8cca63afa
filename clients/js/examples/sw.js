// @ts-check
// A page's service worker taking the helper (type-checked as a worker by check.sh, with
// pushrelay-sw.d.ts declaring the global).
importScripts("/pushrelay-sw.js");

PushRelaySW.install({ genericTitle: "New message", genericBody: "Open the app to read it", url: "/", icon: "/icon-192.png" });

// The app's own handlers may stand beside it: the helper only answers the relay's pushes.
const worker = /** @type {ServiceWorkerGlobalScope} */ (/** @type {unknown} */ (self));
worker.addEventListener("activate", (event) => event.waitUntil(worker.clients.claim()));
