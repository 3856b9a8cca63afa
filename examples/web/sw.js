// The chat's service worker: PushRelay's helper shows the relay's Web Push (title and body, one
// notification per user, none while a window of the chat is focused), withdraws it on `clear`,
// sets the app badge, and focuses or opens the chat on click.
importScripts("/pushrelay-sw.js");
PushRelaySW.install({ genericTitle: "New message", url: "/" });

// Take over at once (the page registers this worker on every load).
self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
