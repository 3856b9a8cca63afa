public import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The PushRelay client for apps: keeps the WebSocket open while the app is in the foreground,
/// reconnects with backoff and jitter, resumes from the last message it delivered, drops
/// duplicates, catches up on return to the foreground, and batches acks.
///
/// ```swift
/// let client = RelayClient(configuration: .init(
///     relayURL: URL(string: "https://relay.example.com")!, userId: "alice",
///     tokenProvider: { refresh in try await api.relayToken(refresh: refresh) }))
/// await client.connect()
/// for await message in client.messages { show(message); await client.ack(message.seq) }
/// ```
public actor RelayClient {
    /// How the client connects; only the URL, the user and the token provider are required.
    public struct Configuration: Sendable {
        /// The relay's base URL (`http(s)://host:port`).
        public var relayURL: URL
        /// The user whose inbox this is (the token's `sub`).
        public var userId: String
        /// The device, for tokens without a `did` claim.
        public var deviceId: String?
        /// Returns a client token; `forceRefresh` is true after the relay refused the last one.
        public var tokenProvider: @Sendable (_ forceRefresh: Bool) async throws -> String
        /// Reconnect delays (full jitter).
        public var backoff = Backoff(base: 1, cap: 30)
        /// A connection that stayed up this long resets the backoff.
        public var stableAfter: Double = 10
        /// Acks are sent at most this often (the highest seq wins).
        public var ackInterval: Double = 0.25
        /// Where the resume cursor is kept; pass a `FileCursorStore` to keep it across launches.
        public var cursorStore: any CursorStore = InMemoryCursorStore()
        /// How sockets are opened (the platform's by default).
        public var transport: any RelayTransport = RelayTransports.platformDefault
        /// Time for waits (injectable for tests).
        public var clock: any RelayClientClock = SystemClock()
        /// Jitter source, a value in 0...1.
        public var random: @Sendable () -> Double = { Double.random(in: 0...1) }
        /// Poll the catch-up endpoint while the socket cannot be opened.
        public var pollWhenSocketFails = true
        /// Seconds an HTTP request of the SDK (catch-up polling, acks over REST) may take.
        public var requestTimeout: Double = 10
        /// The operator's app this build is (a relay serving several names each, e.g. `beta`):
        /// sent with ``RelayClient/setPushToken(_:deviceId:contentFree:)``. Nil: the relay's default.
        public var app: String?

        /// A configuration with the defaults above.
        public init(
            relayURL: URL, userId: String, deviceId: String? = nil,
            tokenProvider: @escaping @Sendable (_ forceRefresh: Bool) async throws -> String
        ) {
            self.relayURL = relayURL
            self.userId = userId
            self.deviceId = deviceId
            self.tokenProvider = tokenProvider
        }
    }

    /// The user's messages, each once, in seq order: the catch-up first, then live ones.
    public nonisolated let messages: AsyncStream<RelayMessage>
    /// Connection states as they change, for the app's UI.
    public nonisolated let states: AsyncStream<ConnectionState>
    /// Tells the app to resynchronize from its chat server (the relay cannot give it the range).
    public nonisolated let resyncs: AsyncStream<ResyncReason>
    /// Signals (typing…) from other users, as they arrive; never replayed after a reconnect.
    public nonisolated let signals: AsyncStream<RelaySignal>
    private let messageSink: AsyncStream<RelayMessage>.Continuation
    private let stateSink: AsyncStream<ConnectionState>.Continuation
    private let resyncSink: AsyncStream<ResyncReason>.Continuation
    private let signalSink: AsyncStream<RelaySignal>.Continuation

    private let configuration: Configuration
    private var cursor: RelayCursor
    private var runner: Task<Void, Never>?
    private var connection: (any RelayConnection)?
    private var wait: Task<Void, any Error>?
    private var pendingAck: Int64 = 0
    private var sentAck: Int64 = 0
    private var ackFlush: Task<Void, Never>?
    /// The open connection's liveness, from what arrives on it (see ``LinkWatchdog``).
    private var watchdog = LinkWatchdog(now: 0)
    /// Text frames received on the open connection (for transports that cannot count bytes).
    private var framesReceived: UInt64 = 0
    /// The SDK's HTTP requests; replaced after a dead link, so that no request waits on a pooled
    /// keep-alive connection over the same dead path.
    private var http: URLSession
    /// The current connection state.
    public private(set) var state: ConnectionState = .offline

    /// A client for one user; it does nothing until `connect()`.
    public init(configuration: Configuration) {
        self.configuration = configuration
        cursor = configuration.cursorStore.load() ?? RelayCursor(epoch: nil, seq: 0)
        (messages, messageSink) = AsyncStream.makeStream(of: RelayMessage.self)
        (states, stateSink) = AsyncStream.makeStream(of: ConnectionState.self)
        (resyncs, resyncSink) = AsyncStream.makeStream(of: ResyncReason.self)
        (signals, signalSink) = AsyncStream.makeStream(of: RelaySignal.self, bufferingPolicy: .bufferingNewest(64))
        http = Self.session(timeout: configuration.requestTimeout)
    }

    private static func session(timeout: Double) -> URLSession {
        let settings = URLSessionConfiguration.ephemeral
        settings.timeoutIntervalForRequest = timeout
        settings.timeoutIntervalForResource = timeout
        return URLSession(configuration: settings)
    }

    /// The cursor: the last seq delivered to the app, and its inbox epoch.
    public var lastSeq: Int64 { cursor.seq }

    // MARK: Lifecycle

    /// Starts connecting (and keeps reconnecting) until `disconnect()` or `enterBackground()`.
    public func connect() {
        guard runner == nil else { return }
        runner = Task { await run() }
    }

    /// Stops reconnecting, sends pending acks, closes the socket and saves the cursor.
    public func disconnect() async {
        runner?.cancel()
        runner = nil
        wait?.cancel()
        await flushAck()
        await connection?.close()
        connection = nil
        configuration.cursorStore.save(cursor)
        set(.offline)
    }

    /// The app goes to the background: tell the relay (so pushes take over), send pending acks,
    /// and close the socket.
    public func enterBackground() async {
        if let connection { try? await connection.send(#"{"type":"background"}"#) }
        await disconnect()
    }

    /// The app is back: reconnect at once (skipping any backoff wait) and catch up.
    public func enterForeground() {
        if runner == nil {
            connect()
        } else {
            wait?.cancel()
        }
    }

    /// Marks everything up to `seq` as read; sent in batches.
    public func ack(_ seq: Int64) {
        pendingAck = max(pendingAck, seq)
        guard ackFlush == nil else { return }
        let delay = configuration.ackInterval
        let clock = configuration.clock
        ackFlush = Task {
            try? await clock.sleep(seconds: delay)
            await self.flushAck()
        }
    }

    /// Sends a signal (typing…) to the chat server, which relays it to the conversation's
    /// online devices. Live only: without an open socket it throws ``RelaySignalError/notConnected``
    /// instead of queueing it (a late typing indicator is worse than none). The relay drops a
    /// user's signals beyond 10 per second (burst 20), all of the user's sockets together.
    public func send(signal: RelaySignal) async throws {
        guard let frame = signal.frame else { throw RelaySignalError.invalid }
        guard let connection else { throw RelaySignalError.notConnected }
        try await connection.send(frame)
    }

    /// Registers the OS's push token as this device's transport (`PUT
    /// /v1/users/{userId}/devices/{deviceId}` with the client token): call it whenever the OS
    /// hands one over, e.g. from `didRegisterForRemoteNotificationsWithDeviceToken`. The token's
    /// `did` must be this device; `contentFree` asks for pushes without the message text. Only
    /// what is named is sent: left nil, `contentFree` keeps what the server registered.
    public func setPushToken(_ token: PushToken, deviceId: String? = nil, contentFree: Bool? = nil) async throws {
        guard let deviceId = deviceId ?? configuration.deviceId else { throw PushTokenError.noDeviceId }
        var body = token.body
        if let contentFree { body["contentFree"] = contentFree }
        if let app = configuration.app { body["app"] = app }
        for refresh in [false, true] {
            guard let credential = try? await configuration.tokenProvider(refresh) else {
                throw PushTokenError.unreachable
            }
            var request = URLRequest(
                url: configuration.relayURL.appendingPathComponent(
                    "v1/users/\(configuration.userId)/devices/\(deviceId)"))
            request.httpMethod = "PUT"
            request.setValue("Bearer \(credential)", forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = try? JSONSerialization.data(withJSONObject: body)
            guard let (data, response) = try? await http.data(for: request),
                let status = (response as? HTTPURLResponse)?.statusCode
            else { throw PushTokenError.unreachable }
            if status == 200 || status == 201 { return }
            // An expired client token: once more with a fresh one.
            if status == 401, !refresh { continue }
            let error = (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?["error"] as? [String: Any]
            throw PushTokenError.refused(status: status, code: error?["code"] as? String)
        }
    }

    // MARK: The connection loop

    private func run() async {
        var attempt = 0
        var refreshToken = false
        while !Task.isCancelled {
            set(.connecting)
            var openedAt: Double?
            var socketFailed = false
            do {
                let token = try await configuration.tokenProvider(refreshToken)
                refreshToken = false
                let opened = try await configuration.transport.connect(
                    url: webSocketURL(), headers: ["Authorization": "Bearer \(token)"])
                connection = opened
                openedAt = configuration.clock.now()
                watchdog = LinkWatchdog(now: configuration.clock.now())
                framesReceived = 0
                set(.syncing)
                let watching = Task { await watch(opened) }
                defer { watching.cancel() }
                try await receive(from: opened)
            } catch RelayTransportError.handshakeRefused(let status) where status == 401 || status == 403 {
                refreshToken = true
            } catch RelayTransportError.closed(let code) where code == 1008 {
                refreshToken = true  // policy: most often an expired token
            } catch RelayTransportError.connectionFailed {
                socketFailed = true
            } catch {
                // Closed by the relay (restart, 1001), dropped, or the token provider failed.
            }
            connection = nil
            configuration.cursorStore.save(cursor)
            guard !Task.isCancelled else { return }
            if let openedAt, configuration.clock.now() - openedAt >= configuration.stableAfter {
                attempt = 0
            }
            attempt += 1
            if socketFailed && configuration.pollWhenSocketFails { await poll() }
            let delay = configuration.backoff.delay(attempt: attempt, random: configuration.random())
            set(.waiting(retryIn: delay))
            let clock = configuration.clock
            let sleeper = Task { try await clock.sleep(seconds: delay) }
            wait = sleeper
            _ = try? await sleeper.value  // cancelled early by enterForeground()
            wait = nil
        }
    }

    private func receive(from connection: any RelayConnection) async throws {
        for try await text in connection.frames {
            // A frame is traffic: the watchdog learns of it now rather than at its next check.
            framesReceived &+= 1
            _ = watchdog.observe(
                count: (connection.receivedCount ?? 0) &+ framesReceived, now: configuration.clock.now())
            guard let data = text.data(using: .utf8),
                let frame = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let type = frame["type"] as? String
            else { continue }
            switch type {
            case "welcome":
                let epoch = frame["epoch"] as? String
                if let epoch, let known = cursor.epoch, known != epoch {
                    resyncSink.yield(.epochChanged(newEpoch: epoch))
                    cursor = RelayCursor(epoch: epoch, seq: 0)
                } else if frame["complete"] as? Bool == false {
                    resyncSink.yield(
                        .messagesPruned(firstAvailableSeq: (frame["firstAvailableSeq"] as? NSNumber)?.int64Value ?? 0))
                }
                cursor.epoch = epoch
                if let interval = (frame["pingIntervalMs"] as? NSNumber)?.doubleValue {
                    watchdog.setPingInterval(interval / 1000)
                }
            case "message":
                let payload = JSONSpans.values(named: "payload", atDepth: 1, in: Array(data)).first ?? []
                if let message = RelayMessage(json: frame, payload: payload) { deliver(message) }
            case "signal":
                let signalData = JSONSpans.values(named: "data", atDepth: 1, in: Array(data)).first
                if let signal = RelaySignal(json: frame, data: signalData) { signalSink.yield(signal) }
            case "synced":
                if let seq = (frame["seq"] as? NSNumber)?.int64Value, seq > cursor.seq { cursor.seq = seq }
                configuration.cursorStore.save(cursor)
                set(.live)
                if pendingAck > sentAck { await flushAck() }
            default:
                break
            }
        }
    }

    /// Pings a quiet link and closes a dead one (its `frames` then end and `run()` reconnects
    /// with the usual backoff).
    private func watch(_ connection: any RelayConnection) async {
        let clock = configuration.clock
        while !Task.isCancelled {
            do { try await clock.sleep(seconds: watchdog.checkInterval) } catch { return }
            guard !Task.isCancelled else { return }
            let count = (connection.receivedCount ?? 0) &+ framesReceived
            switch watchdog.observe(count: count, now: clock.now()) {
            case .none:
                break
            case .ping:
                try? await connection.ping()
            case .dead:
                http.invalidateAndCancel()
                http = Self.session(timeout: configuration.requestTimeout)
                await connection.close()
                return
            }
        }
    }

    /// Hands a message to the app once: anything at or below the cursor was delivered already.
    private func deliver(_ message: RelayMessage) {
        guard message.seq > cursor.seq else { return }
        cursor.seq = message.seq
        messageSink.yield(message)
        if message.seq % 100 == 0 { configuration.cursorStore.save(cursor) }
    }

    private func webSocketURL() -> URL {
        var components = URLComponents(url: configuration.relayURL, resolvingAgainstBaseURL: false)
        components?.scheme = configuration.relayURL.scheme == "https" ? "wss" : "ws"
        components?.path = "/v1/ws"
        var query = [URLQueryItem(name: "after", value: String(cursor.seq))]
        if let epoch = cursor.epoch { query.append(URLQueryItem(name: "epoch", value: epoch)) }
        if let deviceId = configuration.deviceId { query.append(URLQueryItem(name: "deviceId", value: deviceId)) }
        components?.queryItems = query
        return components?.url ?? configuration.relayURL
    }

    // MARK: Acks and polling over REST

    private func flushAck() async {
        ackFlush = nil
        let seq = pendingAck
        guard seq > sentAck else { return }
        if let connection, (try? await connection.send(#"{"type":"ack","seq":\#(seq)}"#)) != nil {
            sentAck = seq
            return
        }
        // No socket: acknowledge over REST so that pushes for read messages stop.
        guard let token = try? await configuration.tokenProvider(false) else { return }
        var request = URLRequest(
            url: configuration.relayURL.appendingPathComponent("v1/users/\(configuration.userId)/ack"))
        request.httpMethod = "POST"
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(#"{"seq":\#(seq)}"#.utf8)
        if let (_, response) = try? await http.data(for: request),
            (response as? HTTPURLResponse)?.statusCode == 204
        {
            sentAck = seq
        }
    }

    /// One catch-up over REST (while the socket cannot be opened), page by page.
    private func poll() async {
        guard let token = try? await configuration.tokenProvider(false) else { return }
        while !Task.isCancelled {
            var components = URLComponents(
                url: configuration.relayURL.appendingPathComponent("v1/users/\(configuration.userId)/messages"),
                resolvingAgainstBaseURL: false)
            var query = [
                URLQueryItem(name: "after", value: String(cursor.seq)), URLQueryItem(name: "limit", value: "500"),
            ]
            if let epoch = cursor.epoch { query.append(URLQueryItem(name: "epoch", value: epoch)) }
            components?.queryItems = query
            guard let url = components?.url else { return }
            var request = URLRequest(url: url)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            guard let (data, response) = try? await http.data(for: request),
                (response as? HTTPURLResponse)?.statusCode == 200,
                let page = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { return }
            if let epoch = page["epoch"] as? String, let known = cursor.epoch, known != epoch {
                resyncSink.yield(.epochChanged(newEpoch: epoch))
                cursor = RelayCursor(epoch: epoch, seq: (page["headSeq"] as? NSNumber)?.int64Value ?? 0)
                return
            }
            cursor.epoch = page["epoch"] as? String
            // Payloads in document order, one per message object of `messages`.
            let payloads = JSONSpans.values(named: "payload", atDepth: 2, in: Array(data))
            for (object, payload) in zip(page["messages"] as? [[String: Any]] ?? [], payloads) {
                if let message = RelayMessage(json: object, payload: payload) { deliver(message) }
            }
            configuration.cursorStore.save(cursor)
            guard page["hasMore"] as? Bool == true else { return }
        }
    }

    private func set(_ newState: ConnectionState) {
        guard newState != state else { return }
        state = newState
        stateSink.yield(newState)
    }
}
