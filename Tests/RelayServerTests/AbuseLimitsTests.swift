import Foundation
import RelayCore
import RelayTesting
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite(.serialized) struct AbuseLimitsTests {
    @Test func aNoisyClientGets429WhileOthersAreServed() async throws {
        let relay = try RelayProcess(arguments: ["--rate-limit-client-per-s", "5"])
        let alice = try await relay.token(userId: "alice")
        let bob = try await relay.token(userId: "bob")
        var statuses: [Int] = []
        var retryAfter: String?
        for _ in 0..<40 {
            let response = try await relay.request("GET", "/v1/users/alice/messages", token: alice)
            statuses.append(response.status)
            if response.status == 429 {
                retryAfter = response.headers["retry-after"]
                #expect(response.errorCode == "rate_limited")
            }
        }
        #expect(statuses.prefix(15).allSatisfy { $0 == 200 })  // the burst
        #expect(statuses.contains(429))
        #expect(Int(retryAfter ?? "") ?? 0 >= 1)
        // Another client and the server key are not affected.
        #expect(try await relay.request("GET", "/v1/users/bob/messages", token: bob).status == 200)
        #expect(try await relay.request("GET", "/v1/users/alice/devices").status == 200)
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

    /// Hundreds of connections trickling a request one byte at a time do not hold up a normal
    /// client, and are closed by the idle timeout.
    @Test func slowlorisDoesNotStarveOthers() async throws {
        let relay = try RelayProcess(arguments: ["--connection-timeout-s", "2", "--max-connections-per-ip", "0"])
        var connections: [RawConnection] = []
        for _ in 0..<300 {
            let connection = try RawConnection(port: relay.port)
            connection.send("GET /healthz HTTP/1.1\r\nHo")
            connections.append(connection)
        }
        let sockets = connections.map(\.fd)
        var slowest = 0.0
        for round in 0..<10 {
            for fd in sockets { _ = send(fd, "s", 1, Int32(MSG_NOSIGNAL)) }  // trickle
            let started = Date()
            let response = try await relay.request(
                "POST", "/v1/messages", json: ["id": "n\(round)", "recipients": ["dee"], "payload": [:]])
            #expect(response.status == 202)
            slowest = max(slowest, Date().timeIntervalSince(started))
            try await Task.sleep(nanoseconds: 100_000_000)
        }
        #expect(slowest < 5.0, "a normal request took \(slowest) s")  // generous: sanitizers, busy CI
        // Silent for longer than the idle timeout: the relay hangs up on them.
        try await Task.sleep(nanoseconds: 3_500_000_000)
        var closed = 0
        for fd in sockets {
            var byte: UInt8 = 0
            var timeout = timeval(tv_sec: 0, tv_usec: 200_000)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            if recv(fd, &byte, 1, 0) == 0 { closed += 1 }
        }
        #expect(closed == sockets.count)
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
        func isClosedByServer(_ fd: Int32) -> Bool {
            var timeout = timeval(tv_sec: 1, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var byte: UInt8 = 0
            return recv(fd, &byte, 1, 0) == 0
        }
        #expect(isClosedByServer(sockets[5]))  // the sixth
        #expect(!isClosedByServer(sockets[0]))  // the first five stay open (idle timeout is 60 s)
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
