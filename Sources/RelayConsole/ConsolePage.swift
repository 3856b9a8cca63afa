/// The operator console's page: HTML that loads `app.css` and `app.js` from `/console/` (the
/// Content-Security-Policy allows nothing else). Compiled into the binary: no build step, no
/// file to ship beside it.
package enum ConsolePage {
    package static let html = #"""
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>PushRelay console</title>
        <link rel="stylesheet" href="/console/app.css">
        </head>
        <body>
        <header>
          <h1>PushRelay</h1>
          <span id="node" class="muted"></span>
          <span id="refreshed" class="muted"></span>
          <button id="sign-out" type="button" hidden>Sign out</button>
        </header>

        <section id="login" class="panel narrow">
          <h2>Sign in</h2>
          <form id="login-form">
            <label for="key">Server key</label>
            <input id="key" type="password" autocomplete="off" required>
            <button type="submit">Open the console</button>
          </form>
          <p class="muted">The key stays in this tab (sessionStorage) and goes to the relay as a bearer header.</p>
          <p id="login-error" class="error" role="alert"></p>
        </section>

        <main id="app" hidden>
          <p id="app-error" class="error" role="alert"></p>
          <section class="cards" id="cards"></section>

          <section class="grid">
            <div class="panel">
              <h2>Pending pushes</h2>
              <svg id="plot-queue" class="plot" viewBox="0 0 600 160" role="img" aria-label="pending pushes over time"></svg>
            </div>
            <div class="panel">
              <h2>Pushes delivered per second</h2>
              <svg id="plot-rate" class="plot" viewBox="0 0 600 160" role="img" aria-label="deliveries per second over time"></svg>
            </div>
          </section>

          <section class="grid">
            <div class="panel">
              <h2>Receivers paused by their breaker</h2>
              <table><thead><tr><th>route</th><th>state</th><th>until</th></tr></thead><tbody id="breakers"></tbody></table>
            </div>
            <div class="panel">
              <h2>Online users</h2>
              <ul id="online" class="chips"></ul>
            </div>
          </section>

          <section class="panel">
            <h2>Dead letters</h2>
            <table>
              <thead><tr><th>id</th><th>user / device</th><th>message</th><th>attempts</th><th>last error</th><th>updated</th><th></th></tr></thead>
              <tbody id="dead"></tbody>
            </table>
          </section>

          <section class="grid">
            <div class="panel">
              <h2>Message timeline</h2>
              <form id="lookup-form" class="inline">
                <input id="message-id" placeholder="message id" required>
                <button type="submit">Look up</button>
              </form>
              <div id="timeline"></div>
            </div>
            <div class="panel">
              <h2>Watch a user</h2>
              <form id="watch-form" class="inline">
                <input id="watch-user" placeholder="user id" required>
                <button type="submit">Watch</button>
                <button id="unwatch" type="button" disabled>Stop</button>
              </form>
              <p id="watch-status" class="muted">Opens the user's WebSocket with a token minted for device <code>console-watch</code>, in the background: it neither counts as online nor acks, and leaves nothing in the user's presence.</p>
              <ol id="frames" class="frames"></ol>
            </div>
          </section>
        </main>
        <script src="/console/app.js"></script>
        </body>
        </html>
        """#

    /// What the page may load and connect to: its own script and style, the API and WebSocket
    /// of the same origin; no inline code, no frames, no forms posting elsewhere.
    package static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}
