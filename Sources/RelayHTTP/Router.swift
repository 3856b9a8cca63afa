/// Maps a method and a path to a handler, with `{name}` path parameters.
///
/// Patterns are matched segment by segment; literal segments win over parameters, so
/// `/v1/presence/query` and `/v1/users/{userId}` can coexist — and a path a more literal
/// pattern names belongs to that pattern alone: with `POST /v1/messages/batch`,
/// `GET /v1/messages/batch` is 405, not `GET /v1/messages/{id}`.
///
/// The matching itself lives in the non-generic `RoutePattern`: generic code called from another
/// module runs unspecialized, and its metadata lookups once cost ~8 % of a request's CPU.
package struct Router<Handler: Sendable>: Sendable {
    package struct Route: Sendable {
        package var method: String
        package var pattern: String
        let compiled: RoutePattern
        let handler: Handler
    }

    package enum Match {
        case found(Handler, route: String, parameters: [String: String])
        /// The path exists with other methods (405 with `Allow`).
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    package private(set) var routes: [Route] = []
    private var patterns: [RoutePattern] = []
    private var methods: [String] = []

    package init() {}

    package mutating func add(_ method: String, _ pattern: String, _ handler: Handler) {
        let compiled = RoutePattern(pattern)
        routes.append(Route(method: method, pattern: pattern, compiled: compiled, handler: handler))
        patterns.append(compiled)
        methods.append(method)
    }

    package func match(method: String, path: String) -> Match {
        switch RoutePattern.match(method: method, path: path, patterns: patterns, methods: methods) {
        case .found(let index, let parameters):
            let route = routes[index]
            return .found(route.handler, route: route.pattern, parameters: parameters)
        case .methodNotAllowed(let allowed): return .methodNotAllowed(allowed: allowed)
        case .notFound: return .notFound
        }
    }
}
