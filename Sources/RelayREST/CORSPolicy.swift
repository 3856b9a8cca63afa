import RelayHTTP
import WebSocketCodec

/// Which web pages may call the relay from an origin of their own (`corsAllowedOrigins`), and on
/// which routes: only those a client token may call. A preflight carries no credential, so it is
/// decided by route; a server key does not belong in a browser, so the server's routes never
/// answer one. Off (no header at all) while no origin is listed; a page of an origin not listed
/// gets no `Access-Control-*` header, and its browser keeps the answer from it.
struct CORSPolicy: Sendable {
    /// The routes a page may call, by route template, with their methods.
    static let clientRoutes: [String: Set<String>] = [
        "/v1/users/{userId}/messages": ["GET"],
        "/v1/users/{userId}/ack": ["POST"],
        "/v1/users/{userId}/presence": ["POST"],
        "/v1/users/{userId}/devices/{deviceId}": ["PUT"],
        "/v1/webpush/key": ["GET"],
    ]
    /// How long a browser may keep a preflight's answer.
    static let maxAgeSeconds = 600
    /// What a page's script may read of an answer besides the simple headers.
    static let exposedHeaders = "Retry-After, X-Request-Id"

    /// Compared as `wsAllowedOrigins` are (`WebSocketHandshake.normalizedOrigin`).
    private let origins: Set<String>

    init(origins: [String]) {
        self.origins = Set(origins.map(WebSocketHandshake.normalizedOrigin))
    }

    /// The headers of an answer to `method` on `route` for a request from `origin`.
    func headers(origin: String?, method: String, route: String?) -> [(name: String, value: String)] {
        guard !origins.isEmpty, let route, Self.clientRoutes[route]?.contains(method) == true else { return [] }
        // (Caches must keep answers to different origins apart.)
        guard let origin, origins.contains(WebSocketHandshake.normalizedOrigin(origin)) else {
            return [("Vary", "Origin")]
        }
        return [
            ("Access-Control-Allow-Origin", origin), ("Access-Control-Expose-Headers", Self.exposedHeaders),
            ("Vary", "Origin"),
        ]
    }

    /// The answer to a preflight (`OPTIONS` asking for `requestedMethod` on `route`): 204 with
    /// the grant, or nil when the policy grants nothing (it is answered as any `OPTIONS` is).
    func preflight(origin: String?, requestedMethod: String?, route: String?) -> HTTPResponse? {
        guard let requestedMethod, let route, let methods = Self.clientRoutes[route] else { return nil }
        let granted = headers(origin: origin, method: requestedMethod, route: route)
        guard granted.contains(where: { $0.name == "Access-Control-Allow-Origin" }) else { return nil }
        return HTTPResponse(
            status: 204,
            headers: granted.filter { $0.name != "Access-Control-Expose-Headers" } + [
                ("Access-Control-Allow-Methods", methods.sorted().joined(separator: ", ")),
                ("Access-Control-Allow-Headers", "Authorization, Content-Type"),
                ("Access-Control-Max-Age", String(Self.maxAgeSeconds)),
            ])
    }
}
