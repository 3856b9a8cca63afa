/// Maps a method and a path to a handler, with `{name}` path parameters.
///
/// Patterns are matched segment by segment; literal segments win over parameters, so
/// `/v1/presence/query` and `/v1/users/{userId}` can coexist — and a path a more literal
/// pattern names belongs to that pattern alone: with `POST /v1/messages/batch`,
/// `GET /v1/messages/batch` is 405, not `GET /v1/messages/{id}`.
package struct Router<Handler: Sendable>: Sendable {
    package struct Route: Sendable {
        package var method: String
        package var pattern: String
        let segments: [Segment]
        let handler: Handler
    }

    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    package enum Match {
        case found(Handler, route: String, parameters: [String: String])
        /// The path exists with other methods (405 with `Allow`).
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    package private(set) var routes: [Route] = []

    package init() {}

    package mutating func add(_ method: String, _ pattern: String, _ handler: Handler) {
        let segments = Self.split(pattern).map { part -> Segment in
            if part.hasPrefix("{"), part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
            return .literal(String(part))
        }
        routes.append(Route(method: method, pattern: pattern, segments: segments, handler: handler))
    }

    package func match(method: String, path: String) -> Match {
        let parts = Self.split(path)
        // Only the most literal patterns that name this path count.
        var most = -1
        var found: (route: Route, parameters: [String: String])?
        var allowed: [String] = []
        for route in routes where route.segments.count == parts.count {
            guard let (parameters, literals) = Self.bind(route.segments, to: parts), literals >= most else { continue }
            if literals > most {
                most = literals
                found = nil
                allowed.removeAll()
            }
            if route.method == method {
                if found == nil { found = (route, parameters) }
            } else if !allowed.contains(route.method) {
                allowed.append(route.method)
            }
        }
        if let found { return .found(found.route.handler, route: found.route.pattern, parameters: found.parameters) }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }

    private static func bind(_ segments: [Segment], to parts: [Substring]) -> ([String: String], Int)? {
        var parameters: [String: String] = [:]
        var literals = 0
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let text):
                guard text == part else { return nil }
                literals += 1
            case .parameter(let name):
                guard !part.isEmpty else { return nil }
                parameters[name] = String(part)
            }
        }
        return (parameters, literals)
    }

    private static func split(_ path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { $0 }
    }
}
