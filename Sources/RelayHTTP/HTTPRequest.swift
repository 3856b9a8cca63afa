/// One HTTP request, fully read (headers, query, body) before any handler sees it.
package struct HTTPRequest: Sendable {
    package var method: String
    /// The decoded path, without the query string.
    package var path: String
    package var query: [(name: String, value: String)]
    /// Header names are lower-cased.
    package var headers: [(name: String, value: String)]
    package var body: [UInt8]
    /// Unique per request; echoed as `X-Request-Id` and on every log line about the request.
    package var id: String
    package var remoteAddress: String
    /// Filled by the router from `{name}` segments of the matched pattern.
    package var pathParameters: [String: String] = [:]

    package init(
        method: String, path: String, query: [(name: String, value: String)] = [],
        headers: [(name: String, value: String)] = [], body: [UInt8] = [], id: String = "test",
        remoteAddress: String = "127.0.0.1"
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.id = id
        self.remoteAddress = remoteAddress
    }

    /// The first header named `name` (case-insensitive).
    package func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first(where: { $0.name == lowered })?.value
    }

    /// The first query parameter named `name`.
    package func queryValue(_ name: String) -> String? {
        query.first(where: { $0.name == name })?.value
    }

    package func parameter(_ name: String) -> String { pathParameters[name] ?? "" }
}
