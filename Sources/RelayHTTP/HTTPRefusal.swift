/// A request the HTTP layer refuses before any handler sees it. The layer knows why, not how
/// the API writes errors: `HTTPServer.Configuration.render` turns it into the answer.
package enum HTTPRefusal: Sendable, Equatable {
    /// The declared or received body is larger than `maxBodyBytes` (413).
    case bodyTooLarge(limit: Int)
    /// Both `Content-Length` and `Transfer-Encoding` (RFC 9112 §6.3: smuggling or a broken proxy).
    case conflictingFraming
    /// A decoded `%00` in the query string.
    case nulInQuery
    /// A request that arrived on an open connection after a draining shutdown began (503).
    case shuttingDown
    /// A request still unanswered when the shutdown's drain time ran out (503); its handler may
    /// still finish (a write may commit), so retrying it must be safe (message ids make it so).
    case unfinishedAtShutdown

    package var status: Int {
        switch self {
        case .bodyTooLarge: return 413
        case .conflictingFraming, .nulInQuery: return 400
        case .shuttingDown, .unfinishedAtShutdown: return 503
        }
    }

    package var message: String {
        switch self {
        case .bodyTooLarge(let limit): return "the request body is larger than \(limit) bytes"
        case .conflictingFraming: return "a request may not carry both Content-Length and Transfer-Encoding"
        case .nulInQuery: return "the query string contains a NUL byte (%00)"
        case .shuttingDown: return "the relay is shutting down"
        case .unfinishedAtShutdown:
            return "the relay shut down before this request finished; it may still take effect: retry it as it was"
        }
    }
}
