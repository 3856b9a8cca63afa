// The SDK's whole surface from a page, in TypeScript against pushrelay.d.ts (`make test` type-checks
// it; it is not run). A React Native app does the same with its WebSocket, AsyncStorage and AppState.
import {
  RelayAuthError,
  RelayClient,
  RelayRequestError,
  RelaySignalError,
  indexedDBCursorStore,
  localStorageCursorStore,
  type ConnectionState,
  type RelayMessage,
  type ResyncReason,
} from "../pushrelay.js";

declare function relayTokenFromMyChatServer(forceRefresh: boolean): Promise<string>;
declare function show(message: RelayMessage): void;
declare function resyncFromChatServer(reason: ResyncReason): Promise<void>;

export async function start(): Promise<RelayClient> {
  const client = new RelayClient({
    url: "https://relay.example.com",
    userId: "alice",
    deviceId: "browser-7f3a",
    getToken: ({ forceRefresh }) => relayTokenFromMyChatServer(forceRefresh),
    cursorStore: localStorageCursorStore("pushrelay:alice:browser-7f3a"),
    app: "web",
  });
  const stopMessages = client.on("message", (message) => {
    show(message);
    const seq: number = message.seq;
    const payload: unknown = message.payload;
    void payload;
    client.ack(seq);
  });
  client.on("state", (state: ConnectionState, detail) => {
    if (state === "waiting") console.log(`retrying in ${detail.retryInMs} ms`);
  });
  client.on("resync", (reason) => {
    if (reason.reason === "epochChanged") console.log(reason.epoch);
    else console.log(reason.firstAvailableSeq);
    void resyncFromChatServer(reason);
  });
  client.on("signal", (signal) => console.log(signal.senderId, signal.name, signal.data));
  client.followVisibility();
  try {
    await client.connect();
  } catch (error) {
    if (error instanceof RelayAuthError) console.log("log in again", error.status);
    throw error;
  }
  try {
    client.sendSignal({ conversationId: "c1", name: "typing", data: { n: 1 } });
  } catch (error) {
    if (error instanceof RelaySignalError && error.kind === "notConnected") console.log("not live");
  }
  const registration = await navigator.serviceWorker.register("/sw.js");
  try {
    const subscription: PushSubscription = await client.enablePush(registration, { contentFree: false });
    console.log(subscription.endpoint);
  } catch (error) {
    if (error instanceof RelayRequestError) console.log(error.status, error.code);
  }
  stopMessages();
  return client;
}

export async function reactNativeLike(asyncStorage: {
  getItem(key: string): Promise<string | null>;
  setItem(key: string, value: string): Promise<void>;
  removeItem(key: string): Promise<void>;
}, WebSocketImpl: new (url: string) => WebSocket): Promise<void> {
  const { asyncStorageCursorStore } = await import("../pushrelay.js");
  const client = new RelayClient({
    url: "https://relay.example.com",
    userId: "alice",
    deviceId: "phone-1",
    getToken: async () => "token",
    cursorStore: asyncStorageCursorStore(asyncStorage, "pushrelay:alice:phone-1"),
    WebSocket: WebSocketImpl,
    fetch: (input, init) => fetch(input, init),
  });
  await client.connect();
  await client.setPushToken({ apns: "ab".repeat(32), topic: "com.example.chat", environment: "sandbox" });
  await client.setPushToken({ fcm: "fcm-registration-token" });
  await client.enterBackground(); // AppState "background"
  client.enterForeground(); // AppState "active"
  await client.logout();
  void indexedDBCursorStore("pushrelay:alice:phone-1");
}
