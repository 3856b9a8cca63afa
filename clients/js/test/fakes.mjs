// Test doubles for the pure tests: a virtual clock with timers, and a scripted WebSocket.

/** Lets every pending promise callback and I/O callback run. */
export const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

/** Timers on a virtual clock: nothing fires until `advance`. `now` in ms. */
export class FakeTimers {
  constructor() {
    this.time = 0;
    this.nextId = 1;
    /** @type {Map<number, { at: number, fn: () => void }>} */
    this.pending = new Map();
    this.setTimeout = (fn, ms) => {
      const id = this.nextId++;
      this.pending.set(id, { at: this.time + Math.max(0, ms), fn });
      return id;
    };
    this.clearTimeout = (id) => {
      this.pending.delete(id);
    };
    this.now = () => this.time;
  }

  /** Moves the clock by `ms`, firing every timer due on the way, in time order. */
  async advance(ms) {
    const target = this.time + ms;
    await settle();
    for (;;) {
      let next = null;
      for (const [id, timer] of this.pending) {
        if (timer.at <= target && (!next || timer.at < next[1].at)) next = [id, timer];
      }
      if (!next) break;
      this.pending.delete(next[0]);
      this.time = next[1].at;
      next[1].fn();
      await settle();
    }
    this.time = target;
    await settle();
  }

  /** The delays of the timers now pending, from now. */
  delays() {
    return [...this.pending.values()].map((t) => t.at - this.time).sort((a, b) => a - b);
  }
}

/** A WebSocket the test drives: every instance is kept in `FakeSocket.made`. */
export class FakeSocket {
  /** @type {FakeSocket[]} */
  static made = [];

  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.sent = [];
    this.closedByClient = null;
    this.onopen = this.onmessage = this.onclose = this.onerror = null;
    FakeSocket.made.push(this);
  }

  static reset() {
    FakeSocket.made = [];
  }

  static get last() {
    return FakeSocket.made.at(-1);
  }

  send(text) {
    if (this.readyState !== 1) throw new Error("not open");
    this.sent.push(JSON.parse(text));
  }

  close(code, reason) {
    this.closedByClient = { code, reason };
    this.readyState = 3;
  }

  // The server's side.
  open() {
    this.readyState = 1;
    this.onopen?.({});
  }

  frame(object) {
    this.onmessage?.({ data: JSON.stringify(object) });
  }

  /** welcome, the messages with these seqs, synced. */
  sync(seqs, { epoch = "E1", pingIntervalMs = 25000, complete = true } = {}) {
    this.frame({ type: "welcome", epoch, complete, firstAvailableSeq: 1, headSeq: seqs.at(-1) ?? 0, pingIntervalMs });
    for (const seq of seqs) this.message(seq);
    this.frame({ type: "synced", seq: seqs.at(-1) ?? 0 });
  }

  message(seq) {
    this.frame({ type: "message", seq, id: `m${seq}`, payload: { seq }, createdAt: "2026-01-01T00:00:00.000Z" });
  }

  drop(code = 1006, reason = "") {
    this.readyState = 3;
    this.onerror?.({});
    this.onclose?.({ code, reason });
  }
}

/** A fetch that answers every request with `status` (and records the URLs). */
export function fakeFetch(answer = () => ({ status: 503, body: null })) {
  const calls = [];
  const fn = async (url, init = {}) => {
    calls.push({ url, method: init.method ?? "GET", body: init.body ? JSON.parse(init.body) : undefined, headers: init.headers });
    const { status, body } = answer(url, init);
    if (status === 0) throw new TypeError("fetch failed");
    return { status, text: async () => (body == null ? "" : JSON.stringify(body)) };
  };
  fn.calls = calls;
  return fn;
}
