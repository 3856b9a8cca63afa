import RelayConsole
import RelayHTTP

extension RelayAPI {
    /// The operator console's three files, built once. The page holds no data and needs no key
    /// (it asks the operator for one); every answer carries the console's strict CSP.
    static let consoleFiles: [String: HTTPResponse] = [
        "/console": consoleFile(ConsolePage.html, type: "text/html; charset=utf-8"),
        "/console/app.js": consoleFile(ConsoleScript.javascript, type: "text/javascript; charset=utf-8"),
        "/console/app.css": consoleFile(ConsoleStyle.css, type: "text/css; charset=utf-8"),
    ]

    private static func consoleFile(_ text: String, type: String) -> HTTPResponse {
        HTTPResponse(
            status: 200,
            headers: [
                ("Content-Type", type), ("Content-Security-Policy", ConsolePage.contentSecurityPolicy),
                ("X-Content-Type-Options", "nosniff"), ("Referrer-Policy", "no-referrer"),
                ("X-Frame-Options", "DENY"), ("Cache-Control", "no-cache"),
            ],
            body: Array(text.utf8))
    }

    /// `GET /console`, `/console/app.js`, `/console/app.css`.
    func getConsoleFile(_ request: HTTPRequest, _ reply: Reply) {
        reply.send(Self.consoleFiles[request.path] ?? APIError.notFound("no such console file").response)
    }
}
