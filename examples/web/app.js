// The web chat on PushRelay's JavaScript SDK. The page talks to two servers: its own origin
// (serve.py, standing in for the chat server: client tokens, posting messages) and the relay on
// another origin (the SDK's WebSocket and REST calls, allowed by the relay's corsAllowedOrigins).
import { RelayClient, localStorageCursorStore } from "/pushrelay.js";

const $ = (id) => /** @type {HTMLElement} */ (document.getElementById(id));
const config = await (await fetch("/config.json")).json(); // { relay, users }
const user = new URLSearchParams(location.search).get("user");

if (!config.users.includes(user)) {
  // The lobby: pick who you are (two tabs, or two browsers, one per user).
  for (const name of config.users) {
    const link = Object.assign(document.createElement("a"), { href: `/?user=${name}`, textContent: name });
    $("users").append(link, " ");
  }
  $("lobby").hidden = false;
} else {
  await startChat(user);
}

async function startChat(user) {
  const peer = config.users.find((name) => name !== user);
  $("me").textContent = user;
  $("peer").textContent = peer;
  $("room").hidden = false;

  // One device per user and browser, kept across reloads.
  const deviceKey = `chat:device:${user}`;
  const deviceId = localStorage.getItem(deviceKey) ?? `web-${crypto.randomUUID().slice(0, 8)}`;
  localStorage.setItem(deviceKey, deviceId);

  const client = new RelayClient({
    url: config.relay,
    userId: user,
    deviceId,
    // The chat server mints the client token (the server key stays there).
    getToken: async () => {
      const answer = await fetch("/api/token", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ userId: user, deviceId }),
      });
      if (!answer.ok) throw new Error(`no token (HTTP ${answer.status})`);
      return (await answer.json()).token;
    },
    // The cursor survives a reload: the page resumes where it was, each message once.
    cursorStore: localStorageCursorStore(`pushrelay:${user}:${deviceId}`),
  });

  client.on("message", (m) => {
    const item = document.createElement("li");
    item.dataset.seq = String(m.seq);
    item.dataset.id = m.id;
    const from = document.createElement("b");
    from.textContent = `${m.payload.from}: `;
    item.append(from, String(m.payload.text));
    $("messages").append(item);
    client.ack(m.seq); // shown = read: pushes for it stop on every device, and their notifications go
  });
  client.on("state", (state, { retryInMs }) => {
    $("status").textContent = state === "waiting" ? `reconnecting in ${Math.round(retryInMs / 1000)} s` : state;
  });
  client.on("resync", (reason) => {
    // The relay cannot tell what was missed (its inbox was replaced, or pruned): a real app
    // reloads the conversation from its chat server here.
    const note = Object.assign(document.createElement("li"), { className: "note", textContent: `resync: ${reason.reason}` });
    $("messages").append(note);
  });
  client.followVisibility(); // a hidden tab backgrounds the device: pushes take over

  // The worker shows pushes while no window of the chat is focused.
  const registration = "serviceWorker" in navigator
    ? await navigator.serviceWorker.register("/sw.js").catch((error) => (console.error(error), null))
    : null;

  async function enablePush() {
    if (!registration) throw new Error("no service workers here (a secure context is needed)");
    await client.enablePush(registration);
    $("push-status").textContent = "notifications on";
  }
  $("notify").addEventListener("click", () =>
    enablePush().catch((error) => {
      $("push-status").textContent = `notifications unavailable: ${error.message}`;
    }),
  );

  $("send").addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = /** @type {HTMLInputElement} */ ($("text"));
    if (!text.value.trim()) return;
    const answer = await fetch("/api/messages", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ from: user, text: text.value }),
    });
    if (answer.ok) text.value = ""; // it comes back from the relay, in order, like the peer's
  });

  // For the browser's console (and Tests/Peers/browser_peer.py, which drives this page).
  Object.assign(window, { chat: { client, user, deviceId, registration, enablePush } });
  try {
    await client.connect();
  } catch (error) {
    $("status").textContent = `refused: ${error.message}`;
  }
}
