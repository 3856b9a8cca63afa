// Types of pushrelay-sw.js (a classic script: it defines the global `PushRelaySW`). Hand-written;
// clients/js/check.sh type-checks examples/sw.js against it.
/// <reference lib="webworker" />

/** The relay's Web Push payload (docs/ARCHITECTURE.md §5). */
interface RelayPush {
  type: "message" | "clear";
  userId: string;
  deviceId: string;
  messageId?: string;
  seq: { from: number; to: number };
  unread: number;
  priority?: string;
  collapseKey?: string | null;
  push?: { title?: string; body?: string; data?: unknown } | null;
}

interface PushRelaySWOptions {
  /** The page a click opens when no window of the app is open (default: the worker's scope). */
  url?: string;
  /** Title of content-free pushes and pushes without text ("New message"). */
  genericTitle?: string;
  /** Their body (""). */
  genericBody?: string;
  icon?: string;
  badge?: string;
  /** Show even while a window of the app is focused (false). */
  showWhenFocused?: boolean;
}

declare var PushRelaySW: {
  /** Adds the `push` and `notificationclick` listeners. */
  install(options?: PushRelaySWOptions): void;
  /** What the helper does with one relay push (for workers that route pushes themselves). */
  handlePush(push: RelayPush, options?: PushRelaySWOptions): Promise<void>;
  /** Focuses a window of the app, or opens one. */
  handleClick(event: NotificationEvent, options?: PushRelaySWOptions): Promise<void>;
  /** The notification a `message` push shows. */
  notificationFor(push: RelayPush, options?: PushRelaySWOptions): { title: string; options: NotificationOptions };
  isRelayPush(value: unknown): value is RelayPush;
  /** `pushrelay:<userId>`: one notification per user. */
  tagFor(userId: string): string;
};
