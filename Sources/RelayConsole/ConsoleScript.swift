/// The console's script (`/console/app.js`): plain JavaScript, no library. Every value from the
/// API reaches the page through `textContent` or SVG attributes, never as markup.
package enum ConsoleScript {
    package static let javascript = #"""
        "use strict";
        (() => {
          const keyName = "pushrelay.serverKey";
          const history = [];          // {t, pending, delivered}: what the plots draw (10 minutes)
          let key = sessionStorage.getItem(keyName);
          let timer = null;
          let socket = null;
          const $ = (id) => document.getElementById(id);

          function element(tag, text, className) {
            const node = document.createElement(tag);
            if (text !== undefined && text !== null) node.textContent = String(text);
            if (className) node.className = className;
            return node;
          }

          class APIError extends Error {
            constructor(status, code, message) { super(message); this.status = status; this.code = code; }
          }

          async function api(method, path, body) {
            const init = { method, headers: { Authorization: "Bearer " + key } };
            if (body !== undefined) {
              init.headers["Content-Type"] = "application/json";
              init.body = JSON.stringify(body);
            }
            const response = await fetch(path, init);
            const text = await response.text();
            let json = null;
            try { json = text ? JSON.parse(text) : null; } catch (_) { json = null; }
            if (!response.ok) {
              const error = (json && json.error) || {};
              throw new APIError(response.status, error.code || "http_" + response.status, error.message || response.statusText);
            }
            return json;
          }

          // MARK: Sign-in

          function showApp(signedIn) {
            $("login").hidden = signedIn;
            $("app").hidden = !signedIn;
            $("sign-out").hidden = !signedIn;
          }

          async function signIn(candidate) {
            key = candidate;
            try {
              await refresh();
            } catch (error) {
              key = null;
              sessionStorage.removeItem(keyName);
              showApp(false);
              $("login-error").textContent = error.status === 401 || error.status === 403
                ? "The relay refused this server key (" + error.status + " " + error.code + ")."
                : "The relay did not answer: " + error.message;
              return;
            }
            sessionStorage.setItem(keyName, key);
            $("login-error").textContent = "";
            showApp(true);
            clearInterval(timer);
            timer = setInterval(() => refresh().catch(showError), 2000);
          }

          function signOut() {
            clearInterval(timer);
            stopWatching();
            key = null;
            sessionStorage.removeItem(keyName);
            showApp(false);
          }

          function showError(error) {
            $("app-error").textContent = error ? "Last refresh failed: " + error.message : "";
          }

          // MARK: Overview

          async function refresh() {
            const stats = await api("GET", "/v1/stats");
            const dead = await api("GET", "/v1/deliveries?state=dead&limit=50");
            const node = stats.nodes[0];
            $("node").textContent = "v" + node.version + " · up " + duration(node.uptimeSeconds) + (node.ready ? "" : " · shutting down");
            $("refreshed").textContent = "refreshed " + new Date().toLocaleTimeString();
            renderCards(stats);
            renderBreakers(stats.breakers);
            renderOnline(stats.onlineUsers, stats.usersOnline);
            renderDead(dead.deliveries);
            history.push({ t: Date.now(), pending: stats.pushJobs.pending, delivered: stats.totals.pushesDelivered });
            while (history.length && history[0].t < Date.now() - 600000) history.shift();
            plot($("plot-queue"), history.map((s) => [s.t, s.pending]));
            const rates = [];
            for (let i = 1; i < history.length; i++) {
              const seconds = (history[i].t - history[i - 1].t) / 1000;
              rates.push([history[i].t, Math.max(0, history[i].delivered - history[i - 1].delivered) / seconds]);
            }
            plot($("plot-rate"), rates);
            showError(null);
          }

          function renderCards(stats) {
            const node = stats.nodes[0];
            const cards = [
              ["Node", node.ready ? "ready" : "draining", node.ready ? "good" : "bad"],
              ["WebSockets open", node.webSockets],
              ["Users online", stats.usersOnline],
              ["Pushes pending", stats.pushJobs.pending],
              ["Pushes delivered", stats.pushJobs.delivered],
              ["Dead letters", stats.pushJobs.dead, stats.pushJobs.dead > 0 ? "bad" : ""],
              ["Breakers open", stats.breakers.length, stats.breakers.length > 0 ? "bad" : ""],
              ["Messages accepted", stats.totals.messagesAccepted],
            ];
            $("cards").replaceChildren(...cards.map(([label, value, tone]) => {
              const card = element("div", undefined, "card " + (tone || ""));
              card.append(element("div", value, "value"), element("div", label, "label"));
              return card;
            }));
          }

          function renderBreakers(breakers) {
            const rows = breakers.map((b) =>
              row([[b.transport, b.credential, b.host].filter(Boolean).join(" "), b.state, b.until ? time(b.until) : "—"]));
            $("breakers").replaceChildren(...(rows.length ? rows : [row(["none", "", ""], "muted")]));
          }

          function renderOnline(users, total) {
            const items = users.map((u) => element("li", u));
            if (total > users.length) items.push(element("li", "+" + (total - users.length) + " more"));
            $("online").replaceChildren(...(items.length ? items : [element("li", "nobody")]));
          }

          function renderDead(deliveries) {
            const rows = deliveries.map((d) => {
              const tr = row([d.id, d.userId + " / " + d.deviceId]);
              // A dead letter's message opens its trace.
              const message = element("td");
              if (d.messageId) {
                const link = element("button", d.messageId, "link");
                link.type = "button";
                link.addEventListener("click", (event) => { $("message-id").value = d.messageId; lookUp(event); });
                message.append(link);
              } else {
                message.textContent = "(clear)";
              }
              tr.append(message, element("td", d.attempts));
              tr.append(element("td", d.lastError || "", "error-text"), element("td", time(d.updatedAt)));
              const cell = element("td");
              const button = element("button", "Replay");
              button.type = "button";
              button.dataset.delivery = d.id;
              button.addEventListener("click", () => replay(d.id, button));
              cell.append(button);
              tr.append(cell);
              return tr;
            });
            $("dead").replaceChildren(...(rows.length ? rows : [row(["no dead letters", "", "", "", "", "", ""], "muted")]));
          }

          async function replay(id, button) {
            button.disabled = true;
            try {
              await api("POST", "/v1/deliveries/" + encodeURIComponent(id) + "/retry");
              button.textContent = "Queued";
              setTimeout(() => refresh().catch(showError), 500);
            } catch (error) {
              button.disabled = false;
              showError(error);
            }
          }

          function row(cells, className) {
            const tr = element("tr", undefined, className);
            for (const cell of cells) tr.append(element("td", cell));
            return tr;
          }

          // MARK: Plots (SVG, no library)

          function plot(svg, points) {
            const ns = "http://www.w3.org/2000/svg";
            const make = (tag, attributes, text) => {
              const node = document.createElementNS(ns, tag);
              for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
              if (text !== undefined) node.textContent = text;
              return node;
            };
            const width = 600, height = 160, left = 40, bottom = 20;
            const children = [
              make("line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, class: "axis" }),
              make("line", { x1: left, y1: 0, x2: left, y2: height - bottom, class: "axis" }),
            ];
            if (points.length === 0) {
              children.push(make("text", { x: left + 8, y: 20 }, "collecting…"));
            } else {
              const t0 = points[0][0], t1 = Math.max(points[points.length - 1][0], t0 + 1);
              const top = Math.max(1, ...points.map((p) => p[1]));
              const x = (t) => left + (width - left) * (t - t0) / (t1 - t0);
              const y = (v) => (height - bottom) - (height - bottom - 10) * v / top;
              children.push(make("polyline", { class: "line", points: points.map((p) => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" ") }));
              children.push(make("text", { x: 2, y: 14 }, compact(top)));
              children.push(make("text", { x: 2, y: height - bottom }, "0"));
              children.push(make("text", { x: left, y: height - 4 }, new Date(t0).toLocaleTimeString()));
              children.push(make("text", { x: width - 70, y: height - 4 }, new Date(t1).toLocaleTimeString()));
            }
            svg.replaceChildren(...children);
          }

          // MARK: Message timeline

          // A message and its delivery trace: per recipient, per device, why it was (not) pushed
          // and every attempt (GET /v1/messages/{id}/deliveries).
          async function lookUp(event) {
            event.preventDefault();
            const id = $("message-id").value.trim();
            const box = $("timeline");
            try {
              const path = "/v1/messages/" + encodeURIComponent(id);
              const [message, trace] = await Promise.all([api("GET", path), api("GET", path + "/deliveries")]);
              const list = element("ol");
              list.append(element("li", time(message.createdAt) + " accepted for " + message.recipients.length + " recipient(s), priority " + message.priority));
              for (const r of trace.recipients) {
                const item = element("li", r.userId + " · seq " + r.seq + " · ");
                item.append(element("span", r.state, "state-" + r.state));
                const devices = element("ul", undefined, "trace");
                for (const d of r.devices) {
                  const device = element("li", d.deviceId + " (" + (d.transport || "deleted") + (d.app ? ", " + d.app : "") + (d.to ? " → " + d.to : "") + ") · ");
                  device.append(element("span", d.decision, "decision-" + d.decision));
                  if (d.reason) device.append(document.createTextNode(" · " + d.reason));
                  if (d.window) device.append(document.createTextNode(" · window: " + d.window.join(", ")));
                  if (d.dueAt) device.append(document.createTextNode(" · due " + time(d.dueAt)));
                  const attempts = element("ol", undefined, "attempts");
                  for (const a of d.attempts) {
                    attempts.append(element("li", time(a.at) + " · " + a.kind + " seq " + a.seq.from + "–" + a.seq.to + " · " + (a.status === null ? "no answer" : "HTTP " + a.status) + " · " + a.result + (a.reason ? " · " + a.reason : "") + " · " + a.latencyMs + " ms" + (a.providerId ? " · id " + a.providerId : "")));
                  }
                  if (d.attempts.length) device.append(attempts);
                  devices.append(device);
                }
                item.append(devices);
                list.append(item);
              }
              if (time(message.expiresAt)) list.append(element("li", "expires " + time(message.expiresAt), "muted"));
              box.replaceChildren(list);
            } catch (error) {
              box.replaceChildren(element("p", error.status === 404 ? "No message with this id." : error.message, "error"));
            }
          }

          // MARK: Watching a user's socket

          async function watch(event) {
            event.preventDefault();
            stopWatching();
            const userId = $("watch-user").value.trim();
            try {
              const minted = await api("POST", "/v1/tokens", { userId, deviceId: "console-watch", ttl: 3600 });
              const page = await api("GET", "/v1/users/" + encodeURIComponent(userId) + "/messages?limit=1&after=0");
              const scheme = location.protocol === "https:" ? "wss:" : "ws:";
              const url = scheme + "//" + location.host + "/v1/ws?state=background&after=" + page.headSeq + "&access_token=" + encodeURIComponent(minted.token);
              socket = new WebSocket(url);
              $("unwatch").disabled = false;
              socket.addEventListener("open", () => {
                $("watch-status").textContent = "Watching " + userId + " (from seq " + page.headSeq + ").";
              });
              socket.addEventListener("message", (message) => {
                const frames = $("frames");
                frames.prepend(element("li", new Date().toLocaleTimeString() + "  " + message.data));
                while (frames.children.length > 200) frames.lastChild.remove();
              });
              socket.addEventListener("close", (close) => {
                $("watch-status").textContent = "Socket closed (" + close.code + (close.reason ? " " + close.reason : "") + ").";
                $("unwatch").disabled = true;
              });
            } catch (error) {
              $("watch-status").textContent = "Cannot watch " + userId + ": " + error.message;
            }
          }

          function stopWatching() {
            if (socket) socket.close(1000, "done");
            socket = null;
          }

          // MARK: Formatting

          function time(value) { return value ? new Date(value).toLocaleString() : ""; }
          function compact(n) { return n >= 1000 ? (n / 1000).toFixed(1) + "k" : String(Math.round(n * 10) / 10); }
          function duration(seconds) {
            if (seconds < 120) return seconds + " s";
            if (seconds < 7200) return Math.floor(seconds / 60) + " min";
            return Math.floor(seconds / 3600) + " h";
          }

          $("login-form").addEventListener("submit", (event) => { event.preventDefault(); signIn($("key").value); });
          $("sign-out").addEventListener("click", signOut);
          $("lookup-form").addEventListener("submit", lookUp);
          $("watch-form").addEventListener("submit", watch);
          $("unwatch").addEventListener("click", stopWatching);
          if (key) signIn(key); else showApp(false);
        })();
        """#
}
