// A small RFC 6455 client over node:net with the browser's WebSocket shape (onopen, onmessage,
// onclose, onerror, send, close, readyState), injected into the SDK as React Native or a page
// would inject theirs. Text and binary frames, fragmentation, ping → pong, the close handshake;
// `ws:` only (the tests talk to 127.0.0.1).
//
// Why not Node's own WebSocket (`--experimental-websocket`, undici): this one is injected, the
// path React Native takes. (The relay used to answer the upgrade with `Connection: Upgrade,
// Upgrade`, which undici refused; it now sends `Upgrade` once, and e2e.test.mjs runs undici too.)
import { createHash, randomBytes } from "node:crypto";
import { connect } from "node:net";

const GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

export class NodeWebSocket {
  static CONNECTING = 0;
  static OPEN = 1;
  static CLOSING = 2;
  static CLOSED = 3;

  /** @param {string} url */
  constructor(url) {
    const parsed = new URL(url);
    if (parsed.protocol !== "ws:") throw new SyntaxError(`only ws: URLs: ${url}`);
    this.url = url;
    this.readyState = 0;
    this.onopen = this.onmessage = this.onclose = this.onerror = null;
    this.buffer = Buffer.alloc(0);
    this.fragments = [];
    this.closeSent = false;
    this.closed = false;
    const key = randomBytes(16).toString("base64");
    this.expectedAccept = createHash("sha1").update(key + GUID).digest("base64");
    this.socket = connect(Number(parsed.port || 80), parsed.hostname, () => {
      this.socket.write(
        `GET ${parsed.pathname}${parsed.search} HTTP/1.1\r\nHost: ${parsed.host}\r\nUpgrade: websocket\r\n` +
          `Connection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      );
    });
    this.socket.setNoDelay(true);
    this.socket.on("data", (data) => this.#received(data));
    this.socket.on("error", () => this.#fail());
    this.socket.on("close", () => this.#fail());
  }

  /** @param {string} text */
  send(text) {
    if (this.readyState !== 1) throw new Error("WebSocket is not open");
    this.#write(0x1, Buffer.from(String(text), "utf8"));
  }

  close(code = 1000, reason = "") {
    if (this.readyState >= 2) return;
    if (this.readyState === 0) {
      this.socket.destroy();
      this.#fail();
      return;
    }
    this.readyState = 2;
    this.#sendClose(code, reason);
    // A peer that never answers the close (a dead link) must not hold the socket.
    setTimeout(() => this.socket.destroy(), 2000).unref();
  }

  #sendClose(code, reason) {
    if (this.closeSent) return;
    this.closeSent = true;
    const payload = Buffer.concat([Buffer.from([code >> 8, code & 0xff]), Buffer.from(reason, "utf8")]);
    this.#write(0x8, payload);
  }

  #write(opcode, payload) {
    const mask = randomBytes(4);
    let header;
    if (payload.length < 126) {
      header = Buffer.from([0x80 | opcode, 0x80 | payload.length]);
    } else if (payload.length < 65536) {
      header = Buffer.from([0x80 | opcode, 0x80 | 126, payload.length >> 8, payload.length & 0xff]);
    } else {
      header = Buffer.alloc(10);
      header[0] = 0x80 | opcode;
      header[1] = 0x80 | 127;
      header.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    const masked = Buffer.from(payload);
    for (let i = 0; i < masked.length; i++) masked[i] ^= mask[i & 3];
    if (!this.socket.destroyed) this.socket.write(Buffer.concat([header, mask, masked]));
  }

  #received(data) {
    this.buffer = Buffer.concat([this.buffer, data]);
    if (this.readyState === 0) {
      const end = this.buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = this.buffer.subarray(0, end).toString("latin1").split("\r\n");
      this.buffer = this.buffer.subarray(end + 4);
      const headers = new Map();
      for (const line of head.slice(1)) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon).trim().toLowerCase();
        headers.set(name, headers.has(name) ? `${headers.get(name)}, ${line.slice(colon + 1).trim()}` : line.slice(colon + 1).trim());
      }
      const tokens = (name) => (headers.get(name) ?? "").toLowerCase().split(",").map((t) => t.trim());
      if (!/^HTTP\/1\.1 101 /.test(head[0]) || !tokens("connection").includes("upgrade") ||
          !tokens("upgrade").includes("websocket") || headers.get("sec-websocket-accept") !== this.expectedAccept) {
        this.socket.destroy();
        this.#fail();
        return;
      }
      this.readyState = 1;
      this.onopen?.({});
    }
    while (this.buffer.length >= 2) {
      const first = this.buffer[0];
      const second = this.buffer[1];
      let length = second & 0x7f;
      let offset = 2;
      if (length === 126) {
        if (this.buffer.length < 4) return;
        length = this.buffer.readUInt16BE(2);
        offset = 4;
      } else if (length === 127) {
        if (this.buffer.length < 10) return;
        length = Number(this.buffer.readBigUInt64BE(2));
        offset = 10;
      }
      if (second & 0x80) offset += 4; // servers do not mask; skip a mask if one came
      if (this.buffer.length < offset + length) return;
      const payload = this.buffer.subarray(offset, offset + length);
      this.buffer = this.buffer.subarray(offset + length);
      this.#frame(first & 0x80, first & 0x0f, payload);
    }
  }

  #frame(fin, opcode, payload) {
    if (opcode === 0x9) return this.#write(0xa, payload); // ping → pong
    if (opcode === 0xa) return;
    if (opcode === 0x8) {
      const code = payload.length >= 2 ? payload.readUInt16BE(0) : 1005;
      const reason = payload.subarray(2).toString("utf8");
      if (!this.closeSent) this.#sendClose(code === 1005 ? 1000 : code, "");
      this.socket.end();
      this.#finish(code, reason);
      return;
    }
    if (opcode !== 0x0) this.fragments = [{ opcode, payload }];
    else this.fragments.push({ opcode: 0, payload });
    if (!fin) return;
    const whole = Buffer.concat(this.fragments.map((f) => f.payload));
    const kind = this.fragments[0]?.opcode;
    this.fragments = [];
    if (this.readyState === 1) this.onmessage?.({ data: kind === 0x1 ? whole.toString("utf8") : whole });
  }

  #fail() {
    if (this.closed) return;
    if (this.readyState !== 2) this.onerror?.({});
    this.#finish(1006, "");
  }

  #finish(code, reason) {
    if (this.closed) return;
    this.closed = true;
    this.readyState = 3;
    this.onclose?.({ code, reason, wasClean: code !== 1006 });
  }
}
