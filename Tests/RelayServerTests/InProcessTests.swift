import Foundation
import RelayCore
import RelayServer
import RelaySettings
import RelayStore
import RelayTesting
import Testing

/// The fast tier: the relay runs inside the test (`InProcessRelay`), so that the live side's
/// and the store's state are checked where they are kept — a socket's life in the hub's
/// presence, a catch-up's gap fill, a push waiting in the outbox.
@Suite(.serialized) struct InProcessTests {
    /// Online while a socket is in the foreground; its last time kept once it closes.
    @Test func theHubFollowsASocketsLife() async throws {
        let relay = try InProcessRelay()
        #expect(relay.app.onlineDevices("ana").isEmpty)
        let client = try await relay.connect(user: "ana")
        #expect(try client.nextJSON()["type"] as? String == "welcome")
        #expect(await eventually { relay.app.onlineDevices("ana") == ["phone"] })
        #expect(relay.app.sessionCount("ana") == 1)

        try client.send(json: ["type": "background"])
        #expect(await eventually { relay.app.onlineDevices("ana").isEmpty })
        #expect(relay.app.sessionCount("ana") == 1)  // still connected, not online
        try client.send(json: ["type": "foreground"])
        #expect(await eventually { relay.app.onlineDevices("ana") == ["phone"] })

        client.close()
        _ = try? client.waitForClose()
        #expect(await eventually { relay.app.sessionCount("ana") == 0 })
        #expect(relay.app.onlineDevices("ana").isEmpty)
        #expect(try relay.app.lastOnline("ana")["phone"] != nil)
    }

    /// A socket resuming after seq 1 gets 2 and 3 in order, `synced`, then 4 live: no gap, no
    /// repeat.
    @Test func aResumingSocketGetsTheGapThenLive() async throws {
        let relay = try InProcessRelay()
        func post(_ id: String) async throws {
            _ = try await relay.request(
                "POST", "/v1/messages", json: ["id": id, "recipients": ["ben"], "payload": [:]])
        }
        for n in 1...3 { try await post("m\(n)") }
        let client = try await relay.connect(user: "ben", after: 1)
        #expect(try client.nextJSON()["headSeq"] as? Int == 3)
        #expect(try client.nextJSON()["seq"] as? Int == 2)
        #expect(try client.nextJSON()["seq"] as? Int == 3)
        #expect(try client.nextJSON()["type"] as? String == "synced")
        try await post("m4")
        let live = try client.nextJSON()
        #expect(live["type"] as? String == "message" && live["seq"] as? Int == 4)
        client.close()
        withExtendedLifetime(relay) {}
    }

    /// A live message leaves from the thread that saw its commit become durable, which writes it
    /// to the socket itself: the socket loop is not woken for it. 100 messages to a synced
    /// socket, each read before the next is posted; the loop's thread wakes for its timer check
    /// (once a second), not per message.
    @Test func liveMessagesDoNotWakeTheSocketLoop() async throws {
        let relay = try InProcessRelay()
        let client = try await relay.connect(user: "dee")
        #expect(try client.nextJSON()["type"] as? String == "welcome")
        #expect(try client.nextJSON()["type"] as? String == "synced")
        let turns = relay.app.socketLoopTurns
        let started = Date()
        for n in 1...100 {
            let posted = try await relay.request(
                "POST", "/v1/messages", json: ["id": "d\(n)", "recipients": ["dee"], "payload": ["n": n]])
            #expect(posted.status == 202)
            #expect(try client.nextJSON()["seq"] as? Int == n)
        }
        let woken = relay.app.socketLoopTurns - turns
        let seconds = UInt64(Date().timeIntervalSince(started).rounded(.up))
        #expect(woken <= seconds + 5, "the loop woke \(woken) times in \(seconds) s for 100 messages")
        client.close()
    }

    /// A message to more sockets than its committing thread writes itself (`directFanOut`)
    /// leaves its frames to the socket loop, which is told to write them: every member of a room
    /// of twelve gets each message, in order. (Pings far apart: a ping's write would carry the
    /// frames out too, 25 s later, within the client's wait.)
    @Test func aLargeRoomsFramesAreWrittenByTheLoop() async throws {
        let relay = try InProcessRelay { config in
            config.pingIntervalMs = 600_000
            config.wsDeadAfterMs = 1_200_000
        }
        let members = (0..<12).map { "room\($0)" }
        var clients: [WebSocketTestClient] = []
        for member in members {
            let client = try await relay.connect(user: member)
            #expect(try client.nextJSON()["type"] as? String == "welcome")
            #expect(try client.nextJSON()["type"] as? String == "synced")
            clients.append(client)
        }
        let turns = relay.app.socketLoopTurns
        for n in 1...5 {
            let posted = try await relay.request(
                "POST", "/v1/messages", json: ["id": "r\(n)", "recipients": members, "payload": ["n": n]])
            #expect(posted.status == 202)
        }
        for client in clients {
            for n in 1...5 { #expect(try client.nextJSON()["seq"] as? Int == n) }
        }
        #expect(relay.app.socketLoopTurns > turns)  // (read before the closes, which wake it too)
        for client in clients { client.close() }
    }

    /// What a socket does not take at once waits for the loop, which writes it when the socket
    /// drains: a client with a 16 KiB receive buffer that reads only after 150 live messages of
    /// 60 KB (9 MB, more than the kernel's buffers hold) were sent gets every one, whole and in
    /// order — and the loop's thread, which wrote the rest, woke while it read.
    @Test func framesASocketDidNotTakeFollowOnceItDrains() async throws {
        let relay = try InProcessRelay { $0.wsMaxQueuedBytes = 64 << 20 }
        let token = try await RelayProcess.token(relay.baseURL, userId: "eve", deviceId: "phone")
        let client = try WebSocketTestClient(
            port: relay.port, path: "/v1/ws?access_token=\(token)", receiveBufferBytes: 16_384)
        #expect(try client.nextJSON()["type"] as? String == "welcome")
        #expect(try client.nextJSON()["type"] as? String == "synced")
        let big = String(repeating: "y", count: 60_000)
        let count = 150
        for n in 1...count {
            let posted = try await relay.request(
                "POST", "/v1/messages", json: ["id": "e\(n)", "recipients": ["eve"], "payload": ["y": big, "n": n]])
            #expect(posted.status == 202)
        }
        let turns = relay.app.socketLoopTurns
        for n in 1...count {
            let frame = try client.nextJSON()
            #expect(frame["seq"] as? Int == n)
            #expect((frame["payload"] as? [String: Any])?["y"] as? String == big)
        }
        #expect(relay.app.socketLoopTurns > turns)
        client.close()
    }

    /// An offline device's message leaves one job in the outbox; the user's ack cancels it.
    @Test func anOfflineDevicesPushWaitsUntilTheAck() async throws {
        let relay = try InProcessRelay { config in
            config.pushDelayMs = 3_600_000  // never due within the test
            if case .success(let allowed) = HostAllowList.parse(["127.0.0.1:*"]) { config.pushAllowedHosts = allowed }
        }
        let device = try await relay.request(
            "PUT", "/v1/users/cy/devices/tablet", json: ["pushUrl": "http://127.0.0.1:9/push"])
        #expect(device.status == 200 || device.status == 201)
        _ = try await relay.request("POST", "/v1/messages", json: ["id": "n1", "recipients": ["cy"], "payload": [:]])
        #expect(try relay.app.store.pendingPushCount() == 1)
        let acked = try await relay.request("POST", "/v1/users/cy/ack", json: ["seq": 1])
        #expect(acked.status == 204)
        #expect(try await eventually { try relay.app.store.pendingPushCount() == 0 })
    }

    /// A socket ends (1008) once its token and the 30 s leeway have run out, unless a fresh
    /// token for the same user and device refreshed it first; a token for someone else is no
    /// refresh. On a stepped clock: nothing here waits for time to pass, or races it.
    @Test func aSocketEndsWhenItsTokenExpiresUnlessRefreshed() async throws {
        let clock = SteppedClock()
        let relay = try InProcessRelay(clock: clock)
        func socket(_ device: String) async throws -> WebSocketTestClient {
            let client = try WebSocketTestClient(
                port: relay.port, path: "/v1/ws?access_token=\(try await token("tom", device, ttl: 60))")
            #expect(try client.nextJSON()["type"] as? String == "welcome")
            return client
        }
        func token(_ user: String, _ device: String, ttl: Int) async throws -> String {
            let minted = try await relay.request(
                "POST", "/v1/tokens", json: ["userId": user, "deviceId": device, "ttl": ttl])
            return try #require(minted.object["token"] as? String)
        }
        let expiring = try await socket("phone")
        let refreshed = try await socket("tablet")
        clock.advance(milliseconds: 30_000)
        try refreshed.send(json: ["type": "refresh", "token": try await token("tom", "tablet", ttl: 600)])
        var answer: [String: Any] = [:]
        while answer["type"] as? String != "refreshed" { answer = try refreshed.nextJSON() }

        clock.advance(milliseconds: 61_000)  // 91 s in: past the first tokens' 60 s and the leeway
        #expect(try expiring.waitForClose() == 1008)
        _ = try await relay.request("POST", "/v1/messages", json: ["id": "t1", "recipients": ["tom"], "payload": [:]])
        var delivered = false
        while !delivered { delivered = try refreshed.nextJSON()["id"] as? String == "t1" }

        try refreshed.send(json: ["type": "refresh", "token": try await token("eve", "tablet", ttl: 600)])
        #expect(try refreshed.waitForClose() == 1008)
    }
}
