import Foundation
import RelayCore
import RelayREST
import RelayServer
import RelaySettings
import RelayTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite(.serialized) struct AbuseLimitsTests {
    /// The budget itself, on an injected clock: the burst, then 429 with a `Retry-After`, one
    /// token back per 1/rate seconds, and every other caller unaffected.
    @Test func aNoisyCallerSpendsItsOwnBudgetOnly() {
        let limiter = RateLimiter(
            server: .init(ratePerSecond: 100, burst: 200), client: .init(ratePerSecond: 5, burst: 15))
        let start = Timestamp(milliseconds: 1_000_000)
        for _ in 0..<15 { #expect(limiter.check("alice", isServer: false, now: start) == nil) }
        #expect(limiter.check("alice", isServer: false, now: start) == 1)
        #expect(limiter.check("bob", isServer: false, now: start) == nil)
        #expect(limiter.check("key", isServer: true, now: start) == nil)
        // 200 ms at 5/s is one token: one request passes, the next waits again.
        let later = Timestamp(milliseconds: start.milliseconds + 200)
        #expect(limiter.check("alice", isServer: false, now: later) == nil)
        #expect(limiter.check("alice", isServer: false, now: later) == 1)
        // A slow caller never runs out.
        for step in 1...40 {
            let now = Timestamp(milliseconds: later.milliseconds + Int64(step) * 200)
            #expect(limiter.check("alice", isServer: false, now: now) == nil)
        }
    }

    /// The same through the HTTP stack, on a stopped clock (the in-process tier): 40 requests
    /// pipelined in one write get exactly the burst (3 at 1/s) answered and 37 refused with a
    /// `Retry-After`; a second later one more passes; another client and the server key are not
    /// affected. Nothing here depends on how fast the machine is.
    @Test func aNoisyClientGets429WhileOthersAreServed() async throws {
        let clock = SteppedClock()
        let relay = try InProcessRelay(clock: clock) { $0.rateLimitClientPerS = 1 }
        let alice = try await RelayProcess.token(relay.baseURL, userId: "alice", deviceId: "phone")
        let bob = try await RelayProcess.token(relay.baseURL, userId: "bob", deviceId: "phone")
        let statuses = try pipelined(40, "/v1/users/alice/messages", token: alice, port: relay.port)
        #expect(statuses.codes == Array(repeating: 200, count: 3) + Array(repeating: 429, count: 37))
        #expect(statuses.firstRefusal.contains("\"rate_limited\""))
        #expect(statuses.firstRefusal.lowercased().contains("retry-after: 1\r\n"))
        let inbox = "/v1/users/alice/messages"
        #expect(try await RelayProcess.request(relay.baseURL, "GET", inbox, token: alice).status == 429)
        clock.advance(milliseconds: 1000)
        #expect(try await RelayProcess.request(relay.baseURL, "GET", inbox, token: alice).status == 200)
        #expect(try await RelayProcess.request(relay.baseURL, "GET", inbox, token: alice).status == 429)
        let bobs = "/v1/users/bob/messages"
        #expect(try await RelayProcess.request(relay.baseURL, "GET", bobs, token: bob).status == 200)
        #expect(try await relay.request("GET", "/v1/users/alice/devices").status == 200)
    }

    /// And through the real binary, on its wall clock: the budget refills while the relay
    /// answers, so the bound is what the time it took allows (the burst, one per second
    /// begun, one for the edge) — never a count that a slow, busy machine could miss.
    @Test func theBinaryLimitsANoisyClientByItsWallClock() async throws {
        let relay = try RelayProcess(arguments: ["--rate-limit-client-per-s", "1"])
        let alice = try await relay.token(userId: "alice")
        let started = ContinuousClock.now
        let statuses = try pipelined(40, "/v1/users/alice/messages", token: alice, port: relay.port)
        let seconds = Int((ContinuousClock.now - started).components.seconds) + 1
        #expect(statuses.codes.count == 40 && statuses.codes.allSatisfy { $0 == 200 || $0 == 429 })
        #expect(statuses.codes.prefix(3).allSatisfy { $0 == 200 })  // the burst
        #expect(statuses.codes.filter { $0 == 200 }.count <= 3 + seconds + 1, "\(statuses.codes) in \(seconds) s")
    }

    /// Sends `count` GETs of `path` in one write on one connection; their statuses in order and
    /// the first 429 whole.
    private func pipelined(
        _ count: Int, _ path: String, token: String, port: Int
    ) throws -> (codes: [Int], firstRefusal: String) {
        let connection = try RawConnection(port: port, receiveTimeout: 120)
        let request = "GET \(path) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n\r\n"
        connection.send(String(repeating: request, count: count))
        let (text, _) = connection.read { $0.components(separatedBy: "HTTP/1.1 ").count > count }
        let answers = text.components(separatedBy: "HTTP/1.1 ").dropFirst()
        return (answers.map { Int($0.prefix(3)) ?? 0 }, String(answers.first { $0.hasPrefix("429") } ?? ""))
    }

    @Test func webSocketLimits() async throws {
        let relay = try RelayProcess(arguments: ["--ws-max-per-user", "2", "--ws-frames-per-s", "5"])
        let token = try await relay.token(userId: "carl")
        let first = try WebSocketTestClient(port: relay.port, path: "/v1/ws?access_token=\(token)")
        let second = try WebSocketTestClient(port: relay.port, path: "/v1/ws?access_token=\(token)")
        _ = try first.nextJSON()
        _ = try second.nextJSON()
        // A third socket for the same user is refused before the upgrade.
        let third = try await relay.request(
            "GET", "/v1/ws", token: token,
            headers: [
                "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
                "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            ])
        #expect(third.status == 429)
        #expect(third.errorCode == "too_many_connections")
        // A client flooding frames is closed with 1008; the other socket stays.
        for _ in 0..<40 { try first.send(json: ["type": "foreground"]) }
        #expect(try first.waitForClose() == 1008)
        _ = try await relay.request(
            "POST", "/v1/messages", json: ["id": "still", "recipients": ["carl"], "payload": [:]])
        var delivered = false
        while !delivered {
            let frame = try second.nextJSON()
            delivered = frame["id"] as? String == "still"
        }
    }

    /// A token without `did` names its device with `?deviceId=`; every device named leaves a
    /// presence row, so a client could grow its user's presence without end. Past
    /// `maxDevicesPerUser` a new device is refused at the handshake; known ones still connect,
    /// a device the server named (`did`) is not limited, and deleting a device makes room.
    @Test func aClientCannotNameDevicesWithoutEnd() async throws {
        let relay = try RelayProcess(arguments: ["--max-devices-per-user", "3"])
        let token = AuthAndInputEndToEndTests.hs256(
            ["sub": "dora", "exp": Int(Date().timeIntervalSince1970) + 600],
            secret: "test-client-token-secret-0123456789abcdef")
        let upgrade = [
            "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
        ]
        func connect(_ deviceId: String) throws {
            let socket = try WebSocketTestClient(
                port: relay.port, path: "/v1/ws?deviceId=\(deviceId)&access_token=\(token)")
            #expect(try socket.nextJSON()["type"] as? String == "welcome")
            socket.close()
            #expect(try socket.waitForClose() == 1000)
        }
        func presenceDevices() async throws -> [String] {
            let presence = try await relay.request("GET", "/v1/users/dora/presence")
            return ((presence.object["devices"] as? [[String: Any]]) ?? []).compactMap { $0["deviceId"] as? String }
        }
        for n in 0..<3 { try connect("d\(n)") }
        // The rows are written when each device goes offline: wait until all three are there.
        _ = try await eventually { try await presenceDevices().count >= 3 }
        #expect(try await presenceDevices() == ["d0", "d1", "d2"])
        let refused = try await relay.request(
            "GET", "/v1/ws?deviceId=d3", token: token, headers: upgrade)
        #expect(refused.status == 403)
        #expect(refused.errorCode == "too_many_devices")
        try connect("d1")  // a known device still connects
        // Deleting one makes room for another.
        #expect(try await relay.request("DELETE", "/v1/users/dora/devices/d0").status == 204)
        #expect(try await presenceDevices().contains("d0") == false)
        try connect("d3")
        // A device the chat server named (`did`) is not limited by it.
        let tablet = try await relay.token(userId: "dora", deviceId: "tablet")
        let named = try WebSocketTestClient(port: relay.port, path: "/v1/ws?access_token=\(tablet)")
        #expect(try named.nextJSON()["type"] as? String == "welcome")
        named.close()
    }

    /// Hundreds of connections trickling a request one byte at a time do not hold up a normal
    /// client, and are closed by the idle timeout. "Not held up" without a stopwatch: each normal
    /// request is answered while every trickler is still open. A relay that served it only once
    /// they were gone would answer after the idle timeout (they are not trickled meanwhile), with
    /// them closed; 20 s of idle timeout is far more than a request takes on a busy machine, even
    /// under the thread sanitizer beside other tests (5 s was not). (The head's own deadline is
    /// set out of the way: only idleness closes them here.)
    @Test func slowlorisDoesNotStarveOthers() async throws {
        let relay = try RelayProcess(arguments: [
            "--connection-timeout-s", "20", "--request-header-timeout-ms", "600000", "--max-connections-per-ip", "0",
        ])
        var connections: [RawConnection] = []
        for _ in 0..<300 {
            let connection = try RawConnection(port: relay.port)
            connection.send("GET /healthz HTTP/1.1\r\nHo")
            connections.append(connection)
        }
        let sockets = connections.map(\.fd)
        /// Descriptors the relay has hung up on (EOF or reset; an open one has nothing to read).
        func hungUp() -> [Int32] {
            sockets.filter { fd in
                var byte: UInt8 = 0
                let count = recv(fd, &byte, 1, Int32(MSG_DONTWAIT | MSG_PEEK))
                return !(count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            }
        }
        for round in 0..<10 {
            for fd in sockets { _ = send(fd, "s", 1, Int32(MSG_NOSIGNAL)) }  // trickle
            let response = try await relay.request(
                "POST", "/v1/messages", json: ["id": "n\(round)", "recipients": ["dee"], "payload": [:]])
            #expect(response.status == 202)
            #expect(hungUp().isEmpty, "round \(round): answered only after the relay dropped tricklers")
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        // Silent for longer than the idle timeout: the relay hangs up on them.
        #expect(await eventually(within: 90) { hungUp().count == sockets.count })
        withExtendedLifetime(connections) {}  // the descriptors stay open until here
    }
}

extension AbuseLimitsTests {
    /// `maxConnectionsPerIp`: connections past the cap from one address are refused at once.
    @Test func perAddressConnectionCap() async throws {
        let relay = try RelayProcess(arguments: ["--max-connections-per-ip", "5"])
        var connections: [RawConnection] = []
        for _ in 0..<6 {
            connections.append(try RawConnection(port: relay.port))
            try await Task.sleep(nanoseconds: 50_000_000)  // let the relay accept them in order
        }
        let sockets = connections.map(\.fd)
        func isClosedByServer(_ fd: Int32, within seconds: Int) -> Bool {
            var timeout = timeval(tv_sec: seconds, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, 0) == 0
        }
        #expect(isClosedByServer(sockets[5], within: 30))  // the sixth (however long the relay takes)
        #expect(!isClosedByServer(sockets[0], within: 1))  // the first five stay open (idle timeout is 60 s)
        withExtendedLifetime(connections) {}
    }
}

@Suite struct TokenBucketTests {
    @Test func burstThenRate() {
        var bucket = TokenBucket(ratePerSecond: 2, burst: 3, now: Timestamp(milliseconds: 0))
        let burst = (0..<3).map { _ in bucket.take(now: Timestamp(milliseconds: 0)) }
        #expect(burst == [nil, nil, nil])
        #expect(bucket.take(now: Timestamp(milliseconds: 0)) == 1)
        #expect(bucket.take(now: Timestamp(milliseconds: 500)) == nil)  // 0.5 s × 2/s = 1 token
        #expect(bucket.take(now: Timestamp(milliseconds: 500)) == 1)
        #expect(bucket.take(now: Timestamp(milliseconds: 60_000)) == nil)  // refilled, capped at burst
    }
}
