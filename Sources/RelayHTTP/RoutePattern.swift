/// One route's pattern, split into literal and parameter segments.
struct RoutePattern: Sendable {
    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    enum Match {
        case found(index: Int, parameters: [String: String])
        case methodNotAllowed([String])
        case notFound
    }

    let segments: [Segment]

    init(_ pattern: String) {
        segments = Self.split(pattern).map { part -> Segment in
            if part.hasPrefix("{"), part.hasSuffix("}") { return .parameter(String(part.dropFirst().dropLast())) }
            return .literal(String(part))
        }
    }

    /// The route (an index into `patterns` and `methods`, which run in parallel) for a request.
    static func match(method: String, path: String, patterns: [RoutePattern], methods: [String]) -> Match {
        let parts = split(path)
        // Only the most literal patterns that name this path count.
        var most = -1
        var found: Int?
        var foundParameters: [String: String] = [:]
        var allowed: [String] = []
        for index in patterns.indices where patterns[index].segments.count == parts.count {
            guard let (parameters, literals) = patterns[index].bind(parts), literals >= most else { continue }
            if literals > most {
                most = literals
                found = nil
                allowed.removeAll()
            }
            if methods[index] == method {
                if found == nil {
                    found = index
                    foundParameters = parameters
                }
            } else if !allowed.contains(methods[index]) {
                allowed.append(methods[index])
            }
        }
        if let found { return .found(index: found, parameters: foundParameters) }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed)
    }

    /// The path's parameters and the number of literal segments, if the path fits.
    private func bind(_ parts: [Substring]) -> ([String: String], Int)? {
        var parameters: [String: String] = [:]
        var literals = 0
        for index in segments.indices {
            let part = parts[index]
            switch segments[index] {
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
