public import Foundation

/// Opens WebSocket connections for the client; one implementation per platform.
public protocol RelayTransport: Sendable {
    /// Opens the socket and completes the handshake, or throws `RelayTransportError`.
    func connect(url: URL, headers: [String: String]) async throws -> any RelayConnection
}

/// One open WebSocket: text frames in, text frames out.
public protocol RelayConnection: Sendable {
    /// Text frames until the connection ends; ends by throwing `RelayTransportError.closed`.
    var frames: AsyncThrowingStream<String, any Error> { get }
    /// Sends one text frame.
    func send(_ text: String) async throws
    /// Closes with 1000 (normal closure).
    func close() async
    /// Grows whenever anything arrives on the socket, control frames included, so that a
    /// silently dead link can be told from a quiet one (``LinkWatchdog``). Nil when the transport
    /// cannot tell; the client then counts the text frames it receives.
    var receivedCount: UInt64? { get }
    /// Sends a WebSocket ping; its pong counts in ``receivedCount``.
    func ping() async throws
}

extension RelayConnection {
    /// A transport that cannot count what arrives: the client counts text frames.
    public var receivedCount: UInt64? { nil }
    /// A transport that cannot ping: the client relies on the relay's pings.
    public func ping() async throws {}
}

/// Why a socket could not be opened or ended.
public enum RelayTransportError: Error, Sendable, Equatable {
    /// The server answered the upgrade with this HTTP status (401: the token needs refreshing).
    case handshakeRefused(status: Int)
    /// No connection could be made (relay down, network gone).
    case connectionFailed(String)
    /// The connection ended with this close code (1006: without a close frame).
    case closed(code: UInt16)
}

/// The transports that come with the SDK.
public enum RelayTransports {
    /// The transport of this platform: URLSessionWebSocketTask where it works (Apple platforms),
    /// the project's own codec over a socket elsewhere (Linux's libcurl has no WebSocket).
    public static var platformDefault: any RelayTransport {
        #if canImport(Darwin)
        return URLSessionWebSocketTransport()
        #else
        return POSIXWebSocketTransport()
        #endif
    }
}
