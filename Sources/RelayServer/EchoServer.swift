import RelayHTTP
import RelayREST
import RelaySettings
import RelayWebSocket
import WebSocketCodec

/// `pushrelay ws-echo`: a WebSocket echo endpoint on exactly the relay's codec and socket loop,
/// for conformance suites (e.g. the Autobahn testsuite's fuzzing client). Any path; no auth.
/// Off unless started with that command.
final class EchoServer: WebSocketLoopDelegate {
    let loop: WebSocketLoop
    let http: HTTPServer

    init(config: RelayConfig) throws {
        var loopConfig = WebSocketLoop.Configuration()
        loopConfig.maxMessageBytes = config.maxWsMessageBytes
        loopConfig.pingIntervalMs = config.pingIntervalMs
        loopConfig.deadAfterMs = config.wsDeadAfterMs
        let loop = try WebSocketLoop(configuration: loopConfig)
        self.loop = loop
        var httpConfig = HTTPServer.Configuration()
        httpConfig.listen = config.listen
        httpConfig.threads = config.httpThreads
        httpConfig.render = { APIError($0).response }
        http = HTTPServer(configuration: httpConfig) { request, responder in
            switch WebSocketHandshake.validate(method: request.method, header: { request.header($0) }) {
            case .success(let accept):
                responder.send(
                    .switchingProtocols(
                        headers: [
                            ("Upgrade", "websocket"), ("Sec-WebSocket-Accept", accept),
                        ]
                    ) { socket in _ = loop.adopt(socket) })
            case .failure(let refusal):
                responder.send(APIError(refusal.status, "bad_handshake", refusal.reason).response)
            }
        }
    }

    func start() throws -> String {
        loop.start(delegate: self)
        try http.start()
        return http.url
    }

    func stop() {
        http.quiesce()
        loop.stop()
        http.shutdown()
    }

    func webSocket(_ connection: WebSocketHandle, received message: WebSocketConnection.Message) {
        switch message {
        case .text(let text): connection.send(text: text)
        case .binary(let bytes): connection.send(frames: WebSocketFrame(opcode: .binary, payload: bytes).encoded())
        }
    }

    func webSocketClosed(_ connection: WebSocketHandle, code: UInt16) {}
}
