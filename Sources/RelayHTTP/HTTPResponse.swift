/// A complete response. Bodies are small enough to build in memory (the largest is a
/// catch-up page, bounded by its byte budget).
package struct HTTPResponse: Sendable {
    package var status: Int
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]
    /// Set for a `101 Switching Protocols` answer: receives the socket once the head is sent.
    package var upgrade: (@Sendable (UpgradedSocket) -> Void)?

    package init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// `101 Switching Protocols` with `headers` (e.g. `Upgrade`, `Sec-WebSocket-Accept`); the
    /// handler gets the socket after the answer went out.
    package static func switchingProtocols(
        headers: [(name: String, value: String)], handler: @escaping @Sendable (UpgradedSocket) -> Void
    ) -> HTTPResponse {
        var response = HTTPResponse(status: 101, headers: headers)
        response.upgrade = handler
        return response
    }

    package static func json(_ status: Int, _ body: [UInt8]) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: body)
    }
}
