// The real relay for the end-to-end tests: `pushrelay serve` on 127.0.0.1 with a database of
// its own in a temporary folder; restarts keep the port. Every wait is bounded.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

export const KEY = "js-test-server-key";

/** Seconds a test waits for anything the relay does: far beyond what it takes on a quiet machine. */
export const WAIT_MS = 30000;

export class Relay {
  /** @param {string} binary @param {string[]} extra */
  constructor(binary, extra = []) {
    this.binary = binary;
    this.extra = extra;
    this.dir = mkdtempSync(join(tmpdir(), "pushrelay-js-"));
    this.port = 0;
    this.proc = null;
    this.stderr = "";
  }

  /** Starts the relay and waits for its "listening on" line. */
  async start() {
    const proc = spawn(
      this.binary,
      ["serve", "--listen", `127.0.0.1:${this.port}`, "--db", join(this.dir, "relay.sqlite"), "--server-keys", KEY,
        "--log-level", "warning", "--push-allowed-hosts", "127.0.0.1:*,[::1]:*", ...this.extra],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    this.proc = proc;
    proc.stderr.on("data", (chunk) => {
      this.stderr = (this.stderr + chunk).slice(-8000);
    });
    const lines = createInterface({ input: proc.stdout });
    const line = await withTimeout(
      new Promise((resolve, reject) => {
        lines.once("line", resolve);
        proc.once("exit", (code) => reject(new Error(`relay exited (${code}) before listening: ${this.stderr}`)));
      }),
      WAIT_MS,
      "the relay to listen",
    );
    if (!String(line).includes("listening on ")) throw new Error(`relay did not start: ${line}`);
    this.base = String(line).trim().split("listening on ")[1];
    this.port = Number(this.base.slice(this.base.lastIndexOf(":") + 1));
    return this;
  }

  async kill9() {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise((resolve) => proc.once("exit", resolve));
    proc.kill("SIGKILL");
    await withTimeout(exited, WAIT_MS, "the relay to die");
  }

  /** Stops the relay (SIGTERM, then SIGKILL) and removes its folder. */
  async stop() {
    const proc = this.proc;
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((resolve) => proc.once("exit", resolve));
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(this.dir, { recursive: true, force: true });
  }

  /** One JSON request with the server key (or `token`); returns { status, body }. */
  async http(method, path, body, token = KEY) {
    const response = await fetch(this.base + path, {
      method,
      headers: { Authorization: `Bearer ${token}`, ...(body ? { "Content-Type": "application/json" } : {}) },
      body: body ? JSON.stringify(body) : undefined,
      signal: AbortSignal.timeout(WAIT_MS),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : null };
  }

  /** A client token for `user` and `device` (`ttl` seconds). */
  async token(user, device, ttl = 3600) {
    const { status, body } = await this.http("POST", "/v1/tokens", { userId: user, deviceId: device, ttl });
    if (status !== 200) throw new Error(`token: ${status} ${JSON.stringify(body)}`);
    return body.token;
  }

  /** Posts message `id` for `user`; returns the relay's answer body (202). */
  async post(id, user, extra = {}) {
    const { status, body } = await this.http("POST", "/v1/messages", { id, recipients: [user], payload: { n: id }, ...extra });
    if (status !== 202) throw new Error(`post ${id}: ${status} ${JSON.stringify(body)}`);
    return body;
  }
}

/** Resolves with `promise`, or rejects after `ms` naming what was awaited. */
export function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Polls `predicate` every 20 ms until it holds; rejects after `ms`. */
export async function waitFor(predicate, what, ms = WAIT_MS) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

/** The relay binary the tests run: PUSHRELAY_BIN. */
export function relayBinary() {
  const binary = process.env.PUSHRELAY_BIN;
  if (!binary) throw new Error("set PUSHRELAY_BIN to the relay binary (clients/js/check.sh does)");
  return binary;
}
