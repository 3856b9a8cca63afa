package import RelayCore
package import RelayHTTP
package import RelayStore
package import RelayTelemetry
package import RelayWebSocket
package import WebSocketCodec

/// Wires the WebSocket loop to the relay: opens sessions for upgraded sockets, reads client
/// frames, and fans committed messages out to the sessions of their recipients.
package final class LiveGateway: WebSocketLoopDelegate {
    package let loop: WebSocketLoop
    package let hub: LiveHub
    let store: any RelayStore
    let logger: Logger

    /// When pushes of what a device was sent fall due.
    let delivery: DeliveryPolicy
    /// Checks the tokens of `refresh` frames.
    let auth: any SocketTokenVerifier
    /// A line per socket opened and closed.
    let accessLog: Bool
    /// Hands a client's signal to the chat server (`signal.received`, one attempt), within budget.
    let signals: SignalForwarder

    package init(
        loop: WebSocketLoop, hub: LiveHub, store: any RelayStore, logger: Logger, delivery: DeliveryPolicy,
        auth: any SocketTokenVerifier, accessLog: Bool, signals: SignalForwarder
    ) {
        self.signals = signals
        self.delivery = delivery
        self.auth = auth
        self.accessLog = accessLog
        self.loop = loop
        self.hub = hub
        self.store = store
        self.logger = logger
    }

    /// Takes an upgraded socket and starts its session, which ends when its token expires.
    package func open(
        _ socket: UpgradedSocket, claims: ClientClaims, deviceId: String, after: Int64, epoch: String?,
        background: Bool
    ) {
        let handle = loop.adopt(socket)
        let userId = claims.userId
        let session = LiveSession(
            handle: handle, userId: userId, deviceId: deviceId, store: store,
            logger: logger.with("user.id", userId).with("device.id", deviceId), delivery: delivery,
            tokenExpiresAt: claims.expiresAt + auth.leewaySeconds, clock: hub.clock)
        hub.register(session, background: background)  // before the catch-up is read: see LiveSession
        if accessLog { session.logger.info("websocket opened", ("after", String(after))) }
        session.start(after: after, clientEpoch: epoch, pingIntervalMs: loop.configuration.pingIntervalMs)
    }

    /// A message was committed: live frames for every recipient with an open socket.
    package func publish(_ message: IncomingMessage, recipients: [RecipientSeq], createdAt: Timestamp) {
        hub.publish(recipients) { recipient in
            LiveSession.frame(
                for: InboxMessage(
                    seq: recipient.seq, id: message.id, conversationId: message.conversationId,
                    senderId: message.senderId, payload: message.payload, createdAt: createdAt))
        }
    }

    // MARK: WebSocketLoopDelegate (loop thread)

    package func webSocket(_ connection: WebSocketHandle, received message: WebSocketConnection.Message) {
        guard let session = hub.session(connection.id) else { return }
        guard case .text(let text) = message else {
            connection.close(code: CloseCode.unsupportedData, reason: "only text frames are accepted")
            return
        }
        guard let json = try? JSONParser.parse(Array(text.utf8)), let type = json["type"]?.stringValue else {
            connection.close(code: CloseCode.policyViolation, reason: "a frame must be a JSON object with a type")
            return
        }
        switch type {
        case "ack":
            guard let seq = json["seq"]?.int64Value, seq >= 0 else {
                connection.close(code: CloseCode.policyViolation, reason: "ack needs a seq")
                return
            }
            let logger = self.logger
            let hub = self.hub
            let userId = session.userId
            store.ack(userId: userId, seq: seq, epoch: json["epoch"]?.stringValue, now: hub.clock.now()) { result in
                switch result {
                case .success(.acknowledged(let ackSeq)): hub.acknowledged(userId: userId, seq: ackSeq)
                case .success: break
                case .failure(let error): logger.warning("ack failed", ("error", "\(error)"))
                }
            }
        case "background":
            hub.setBackground(connection.id, true)
        case "foreground":
            hub.setBackground(connection.id, false)
        case "signal":
            // Typing and the like: to the chat server, which knows the conversation's members
            // and answers with `POST /v1/signals`. Never stored.
            guard let signal = try? Signal(FieldReader(json)) else {
                connection.close(
                    code: CloseCode.policyViolation,
                    reason: "a signal needs a conversationId, a name and at most 1 KiB of data")
                return
            }
            signals.forward(userId: session.userId) { time in
                .signalReceived(userId: session.userId, deviceId: session.deviceId, signal, at: time)
            }
        case "refresh":
            // A fresh token for the same user and device keeps the socket open past the old one's expiry.
            guard let token = json["token"]?.stringValue, let claims = auth.socketClaims(token),
                claims.userId == session.userId, claims.deviceId == nil || claims.deviceId == session.deviceId
            else {
                connection.close(code: CloseCode.policyViolation, reason: "invalid token")
                return
            }
            session.refreshToken(expiresAt: claims.expiresAt + auth.leewaySeconds)
            var writer = JSONWriter()
            writer.beginObject()
            writer.member("type", "refreshed")
            writer.member("expiresAt", Timestamp(milliseconds: claims.expiresAt * 1000))
            writer.endObject()
            connection.send(text: String(decoding: writer.bytes, as: UTF8.self))
        default:
            break  // unknown types are ignored, so that newer clients work with this relay
        }
    }

    package func webSocketClosed(_ connection: WebSocketHandle, code: UInt16) {
        if let session = hub.session(connection.id), accessLog {
            let seconds = Double(hub.clock.uptimeMs() - session.openedAt) / 1000
            session.logger.info(
                "websocket closed", ("code", String(code)), ("seconds", String((seconds * 10).rounded() / 10)))
        }
        hub.session(connection.id)?.markClosed()
        hub.unregister(connection.id)
    }
}

extension LiveGateway: LiveSide {
    package func acknowledged(userId: String, seq: Int64) { hub.acknowledged(userId: userId, seq: seq) }
    package func close(userId: String, deviceId: String, reason: String) {
        hub.close(userId: userId, deviceId: deviceId, reason: reason)
    }
    package func setBackground(userId: String, deviceId: String, _ background: Bool) {
        hub.setBackground(userId: userId, deviceId: deviceId, background)
    }
    package func signal(
        _ signal: Signal, senderId: String?, to userIds: [String], except sender: (userId: String, deviceId: String)?
    ) -> Int {
        hub.signal(signal, senderId: senderId, to: userIds, except: sender)
    }
    package func onlineDevices(_ userId: String) -> Set<String> { hub.onlineDevices(userId) }
    package func devices(of userId: String) -> Set<String> { hub.devices(of: userId) }
    package func lastOnline(_ userId: String) throws(StoreError) -> [String: Timestamp] { try hub.lastOnline(userId) }
    package func sessionCount(userId: String) -> Int { hub.sessionCount(userId: userId) }
    package func onlineUsers(limit: Int) -> (total: Int, first: [String]) { hub.onlineUsers(limit: limit) }
    package var socketCount: Int { loop.connectionCount }
}
