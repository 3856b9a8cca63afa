import Foundation
import RelayTesting
import Testing

/// CORS against the real binary: a page of a listed origin may call exactly the routes a client
/// token may call — preflights answered, every answer (errors too) readable — and nothing else.
@Suite struct CORSTests {
    static let page = "http://chat.example:8000"

    static func preflight(
        _ relay: RelayProcess, _ path: String, method: String, origin: String = page
    ) async throws -> RelayProcess.Response {
        try await relay.request(
            "OPTIONS", path, token: nil, headers: ["Origin": origin, "Access-Control-Request-Method": method])
    }

    @Test func aListedPageMayCallTheClientRoutes() async throws {
        let relay = try RelayProcess(arguments: [
            "--cors-allowed-origins", "https://other.example, HTTP://Chat.Example:8000",
        ])
        for (path, method) in [
            ("/v1/users/ann/messages", "GET"), ("/v1/users/ann/ack", "POST"), ("/v1/users/ann/presence", "POST"),
            ("/v1/users/ann/devices/tab", "PUT"), ("/v1/webpush/key", "GET"),
        ] {
            let answer = try await Self.preflight(relay, path, method: method)
            #expect(answer.status == 204, "\(method) \(path): \(answer.status)")
            #expect(answer.headers["access-control-allow-origin"] == Self.page, "\(path)")
            #expect(answer.headers["access-control-allow-methods"] == method, "\(path)")
            let allowed = answer.headers["access-control-allow-headers"]?.lowercased() ?? ""
            #expect(allowed.contains("authorization") && allowed.contains("content-type"), "\(path)")
            #expect(answer.headers["access-control-max-age"] == "600")
            #expect(answer.headers["vary"]?.contains("Origin") == true)
        }
        // The answers themselves carry the grant, errors included (a page must read its 401).
        let refused = try await relay.request(
            "GET", "/v1/users/ann/messages", token: "not-a-token", headers: ["Origin": Self.page])
        #expect(refused.status == 401)
        #expect(refused.headers["access-control-allow-origin"] == Self.page)
        #expect(refused.headers["access-control-expose-headers"] == "Retry-After, X-Request-Id")
        let ack = try await relay.request(
            "POST", "/v1/users/ann/ack", json: ["seq": 0], token: "not-a-token", headers: ["Origin": Self.page])
        #expect(ack.status == 401 && ack.headers["access-control-allow-origin"] == Self.page, "\(ack.status)")
        let token = try await relay.token(userId: "ann", deviceId: "tab")
        let caughtUp = try await relay.request(
            "GET", "/v1/users/ann/messages", token: token, headers: ["Origin": Self.page])
        #expect(caughtUp.status == 200 && caughtUp.headers["access-control-allow-origin"] == Self.page)
    }

    @Test func serverRoutesAndOtherPagesGetNoGrant() async throws {
        let relay = try RelayProcess(arguments: ["--cors-allowed-origins", Self.page])
        // A server key does not belong in a browser: its routes answer no preflight, grant nothing.
        for (path, method) in [("/v1/messages", "POST"), ("/v1/tokens", "POST"), ("/v1/users/ann/devices", "GET")] {
            let answer = try await Self.preflight(relay, path, method: method)
            #expect(answer.status < 500 && answer.status != 204, "\(path): \(answer.status)")
            #expect(answer.headers["access-control-allow-origin"] == nil, "\(path)")
        }
        let posted = try await relay.request(
            "POST", "/v1/messages", json: ["id": "m1", "recipients": ["ann"], "payload": [:]],
            headers: ["Origin": Self.page])
        #expect(posted.status == 202 && posted.headers["access-control-allow-origin"] == nil)
        // A page of an origin not listed: no grant (its browser keeps the answer from it), no 5xx.
        let stranger = try await Self.preflight(
            relay, "/v1/users/ann/messages", method: "GET", origin: "https://evil.example")
        #expect(stranger.status < 500 && stranger.headers["access-control-allow-origin"] == nil)
        let read = try await relay.request(
            "GET", "/v1/users/ann/messages", token: "x", headers: ["Origin": "https://evil.example"])
        #expect(read.status == 401 && read.headers["access-control-allow-origin"] == nil)
        // A method the route does not take from a client is not granted.
        let delete = try await Self.preflight(relay, "/v1/users/ann/devices/tab", method: "DELETE")
        #expect(delete.headers["access-control-allow-origin"] == nil)
    }

    @Test func noOriginListedMeansNoHeaderAtAll() async throws {
        let relay = try RelayProcess()
        let answer = try await Self.preflight(relay, "/v1/users/ann/messages", method: "GET")
        #expect(answer.headers.keys.allSatisfy { !$0.hasPrefix("access-control-") && $0 != "vary" })
        let read = try await relay.request("GET", "/v1/users/ann/messages", headers: ["Origin": Self.page])
        #expect(read.headers.keys.allSatisfy { !$0.hasPrefix("access-control-") })
    }
}
