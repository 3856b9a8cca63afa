import Foundation
import RelayTesting
import Testing
import WebSocketCodec

/// The WebSocket gateway of the real binary: protocol, live delivery, resume, presence.
@Suite(.serialized) struct WebSocketEndToEndTests {
    func connect(
        _ relay: RelayProcess, user: String, device: String = "phone", after: Int? = nil, epoch: String? = nil
    )
        async throws -> WebSocketTestClient
    {
        let token = try await relay.token(userId: user, deviceId: device)
        var path = "/v1/ws?access_token=\(token)"
        if let after { path += "&after=\(after)" }
        if let epoch { path += "&epoch=\(epoch)" }
        return try WebSocketTestClient(port: relay.port, path: path)
    }

    func post(_ relay: RelayProcess, _ id: String, to users: [String]) async throws -> RelayProcess.Response {
        try await relay.request("POST", "/v1/messages", json: ["id": id, "recipients": users, "payload": ["id": id]])
    }

    @Test func welcomeCatchUpSyncedThenLive() async throws {
        let relay = try RelayProcess()
        for n in 1...3 { _ = try await post(relay, "m\(n)", to: ["alice"]) }
        let client = try await connect(relay, user: "alice", after: 1)
        let welcome = try client.nextJSON()
        #expect(welcome["type"] as? String == "welcome")
        #expect(welcome["headSeq"] as? Int == 3)
        #expect(welcome["complete"] as? Bool == true)
        #expect(welcome["deviceId"] as? String == "phone")
        #expect(try client.nextJSON()["seq"] as? Int == 2)
        #expect(try client.nextJSON()["seq"] as? Int == 3)
        let synced = try client.nextJSON()
        #expect(synced["type"] as? String == "synced")
        #expect(synced["seq"] as? Int == 3)

        // Online now: the next message is delivered live, and the answer says so.
        let posted = try await post(relay, "m4", to: ["alice", "bob"])
        let deliveries = (posted.object["recipients"] as? [[String: Any]])?.map { $0["delivery"] as? String }
        #expect(deliveries == ["live", "stored"])
        let live = try client.nextJSON()
        #expect(live["type"] as? String == "message")
        #expect(live["seq"] as? Int == 4)
        #expect((live["payload"] as? [String: Any])?["id"] as? String == "m4")

        // An ack over the socket moves the cursor.
        try client.send(json: ["type": "ack", "seq": 4])
        #expect(
            try await eventually {
                let state = try await relay.request("GET", "/v1/messages/m4")
                return (state.object["recipients"] as? [[String: Any]])?.first?["state"] as? String == "acked"
            })
    }

    @Test func severalDevicesEachGetTheMessage() async throws {
        let relay = try RelayProcess()
        let phone = try await connect(relay, user: "carol", device: "phone")
        let laptop = try await connect(relay, user: "carol", device: "laptop")
        for client in [phone, laptop] {
            _ = try client.nextJSON()  // welcome
            _ = try client.nextJSON()  // synced
        }
        _ = try await post(relay, "x", to: ["carol"])
        #expect(try phone.nextJSON()["id"] as? String == "x")
        #expect(try laptop.nextJSON()["id"] as? String == "x")
    }

    @Test func otherEpochIsToldToResync() async throws {
        let relay = try RelayProcess()
        _ = try await post(relay, "m1", to: ["dave"])
        let client = try await connect(relay, user: "dave", after: 1, epoch: "not-the-epoch")
        let welcome = try client.nextJSON()
        #expect(welcome["complete"] as? Bool == false)
        #expect(try client.nextJSON()["type"] as? String == "synced")  // nothing replayed
        _ = try await post(relay, "m2", to: ["dave"])
        #expect(try client.nextJSON()["seq"] as? Int == 2)  // live continues from the head
    }

    /// A poster posts without pause while a client disconnects and reconnects with `after`
    /// 50 times: it must see every seq exactly once, in order.
    @Test func resumeUnderLoadSeesEverySeqOnce() async throws {
        let relay = try RelayProcess()
        let stop = StopFlag()
        let poster = Task {
            var n = 0
            while await !stop.isSet {
                n += 1
                _ = try? await post(relay, "load-\(n)", to: ["erin"])
            }
            return n
        }
        var seen: [Int] = []
        var epoch: String?
        for round in 0..<50 {
            let client = try await connect(relay, user: "erin", after: seen.last ?? 0, epoch: epoch)
            let welcome = try client.nextJSON()
            #expect(welcome["complete"] as? Bool == true, "round \(round)")
            epoch = welcome["epoch"] as? String
            // Read a varying number of frames (catch-up, synced, live), then drop the connection.
            for _ in 0..<(3 + round % 7) {
                let frame = try client.nextJSON()
                if frame["type"] as? String == "message", let seq = frame["seq"] as? Int { seen.append(seq) }
            }
            if round % 2 == 0 { client.close() } else { client.abort() }
        }
        await stop.set()
        let posted = await poster.value
        #expect(seen == Array(1...seen.count), "gap or duplicate in \(seen.count) seqs")
        #expect(seen.count > 50)
        #expect(posted > 0)
    }

    /// The client below never reads after its welcome, so it answers no ping: the relay drops it
    /// once it has been silent `--ws-dead-after-ms`. Until then each of its frames keeps it alive;
    /// 8 s between two of them is far more than the steps between take on a busy machine (with
    /// 800 ms, a sanitized relay could drop it mid-test).
    @Test func presenceFollowsConnectionsAndSurvivesRestart() async throws {
        let relay = try RelayProcess(arguments: ["--ping-interval-ms", "1000", "--ws-dead-after-ms", "8000"])
        func presence() async throws -> [String: Any] {
            try await relay.request("GET", "/v1/users/frank/presence").object
        }
        func online() async throws -> Bool? { try await presence()["online"] as? Bool }
        #expect(try await presence()["lastOnline"] is NSNull)

        let client = try await connect(relay, user: "frank")
        _ = try client.nextJSON()
        #expect(try await eventually { try await online() == true })

        try client.send(json: ["type": "background"])
        #expect(try await eventually { try await online() == false })
        let backgrounded = try await presence()
        #expect(backgrounded["lastOnline"] is String)

        try client.send(json: ["type": "foreground"])
        #expect(try await eventually { try await online() == true })

        // Missed pongs: this client stops reading, so it never answers the pings.
        #expect(try await eventually(within: 60) { try await online() == false })
        let dropped = try await presence()
        // The drop's time at once (the store may still be writing it), and the same after a restart.
        let lastOnline = try #require(dropped["lastOnline"] as? String)
        #expect(lastOnline > (backgrounded["lastOnline"] as? String ?? ""))

        try relay.restart()
        let afterRestart = try await presence()
        #expect(afterRestart["online"] as? Bool == false)
        #expect(afterRestart["lastOnline"] as? String == lastOnline)
    }

    /// `presence.changed` is produced once per real change, debounced by the push delay: a
    /// reconnect within it produces nothing. The delay is 3 s so that the reconnect (a handshake
    /// with a token minted before) falls inside it on a busy machine; each event is waited for,
    /// and "not reported" is looked at once the delay after the drop has passed.
    @Test func presenceEventsAreDebounced() async throws {
        let delay = 3.0
        let relay = try RelayProcess(arguments: ["--push-delay-ms", "\(Int(delay * 1000))"])
        func events() async throws -> Int {
            let metrics = try await relay.request("GET", "/metrics", token: nil).text
            let line = metrics.split(separator: "\n").first {
                $0.hasPrefix(#"pushrelay_events_total{type="presence.changed"}"#)
            }
            return line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
        }
        let first = try await connect(relay, user: "kim")
        _ = try first.nextJSON()
        #expect(try await eventually { try await events() >= 1 })
        #expect(try await events() == 1)  // online

        let token = try await relay.token(userId: "kim", deviceId: "phone")
        let dropped = Date()
        first.abort()
        // Back within the delay.
        let second = try WebSocketTestClient(port: relay.port, path: "/v1/ws?access_token=\(token)")
        _ = try second.nextJSON()
        try await Task.sleep(nanoseconds: UInt64(max(0, dropped.timeIntervalSinceNow + delay + 1.5) * 1e9))
        #expect(try await events() == 1)  // the flap was not reported

        second.close()
        _ = try? second.waitForClose()
        #expect(try await eventually { try await events() >= 2 })
        #expect(try await events() == 2)  // offline
    }

    /// A client that stops reading is closed with 1008 once its queue passes the bound, instead
    /// of growing the relay's memory; it would resume from its last seq on reconnect.
    @Test func slowConsumerIsClosedWith1008() async throws {
        let relay = try RelayProcess(arguments: ["--ws-max-queued-bytes", "65536", "--max-body-bytes", "16777216"])
        let token = try await relay.token(userId: "leo", deviceId: "phone")
        // The relay closes the socket 5 s after its 1008 decision even if its close frame is still
        // queued behind what the client has not read, so the client must start reading soon after
        // that decision. One batch makes it come at the end: its 7.2 MB are committed together
        // and go out at once, overflowing a pinned 16 KiB receive buffer and the relay's queue;
        // posted one by one, a sanitized relay on a busy machine spent longer than that on the
        // posts after the decision, and the client then saw its socket cut without a close frame.
        let slow = try WebSocketTestClient(
            port: relay.port, path: "/v1/ws?access_token=\(token)", receiveBufferBytes: 16_384)
        _ = try slow.nextJSON()
        let big = String(repeating: "x", count: 60_000)
        let total = 120
        let batch = try await relay.request(
            "POST", "/v1/messages/batch",
            json: [
                "messages": (0..<total).map {
                    ["id": "big-\($0)", "recipients": ["leo"], "payload": ["x": big]] as [String: Any]
                }
            ],
            timeout: 600)
        #expect(batch.status == 200, "\(batch.text.prefix(300))")
        var lastSeq = 0
        var code: UInt16?
        while code == nil {
            switch try slow.next() {
            case .closed(let received): code = received
            case .text(let text):
                if let seq = (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])?["seq"]
                    as? Int
                {
                    lastSeq = seq
                }
            case .binary: break
            }
        }
        #expect(code == 1008)
        #expect(lastSeq < total)
        // Reconnecting from where it got gets the rest, in order.
        let again = try await connect(relay, user: "leo", after: lastSeq)
        _ = try again.nextJSON()
        var next = lastSeq + 1
        while next <= total {
            let frame = try again.nextJSON()
            if frame["type"] as? String == "message" {
                #expect(frame["seq"] as? Int == next)
                next += 1
            }
        }
    }

    @Test func closingTheSocketGoesOffline() async throws {
        let relay = try RelayProcess()
        let client = try await connect(relay, user: "gina")
        _ = try client.nextJSON()
        client.close()
        #expect(try client.waitForClose() == 1000)
        #expect(
            try await eventually {
                try await relay.request("GET", "/v1/users/gina/presence").object["online"] as? Bool == false
            })
        let presence = try await relay.request("GET", "/v1/users/gina/presence").object
        #expect(presence["lastOnline"] is String)
    }

    /// `state=background` (the console's watch): the socket gets live messages, but its device
    /// is never online, so it leaves no device and no `lastOnline` in the user's presence; a
    /// `foreground` frame brings it online as usual.
    @Test func aSocketOpenedInTheBackgroundLeavesNoPresence() async throws {
        let relay = try RelayProcess()
        let token = try await relay.token(userId: "hana", deviceId: "console-watch")
        let watch = try WebSocketTestClient(port: relay.port, path: "/v1/ws?state=background&access_token=\(token)")
        #expect(try watch.nextJSON()["type"] as? String == "welcome")
        #expect(try watch.nextJSON()["type"] as? String == "synced")
        #expect(try await post(relay, "w1", to: ["hana"]).status == 202)
        #expect(try watch.nextJSON()["id"] as? String == "w1")
        var presence = try await relay.request("GET", "/v1/users/hana/presence").object
        #expect(presence["online"] as? Bool == false)
        #expect((presence["devices"] as? [Any])?.isEmpty == true)
        watch.close()
        #expect(try watch.waitForClose() == 1000)
        try await Task.sleep(nanoseconds: 300_000_000)
        presence = try await relay.request("GET", "/v1/users/hana/presence").object
        #expect(presence["lastOnline"] is NSNull)
        #expect((presence["devices"] as? [Any])?.isEmpty == true)
        // Brought to the foreground, it is an ordinary device.
        let later = try WebSocketTestClient(port: relay.port, path: "/v1/ws?state=background&access_token=\(token)")
        _ = try later.nextJSON()
        try later.send(json: ["type": "foreground"])
        #expect(
            try await eventually {
                try await relay.request("GET", "/v1/users/hana/presence").object["online"] as? Bool == true
            })
        later.close()
        let bad = try await relay.request("GET", "/v1/ws?state=asleep", token: token)
        #expect(bad.status == 400)
    }

    /// Upgraded sockets are handed back in full: after many connections come and go (closed
    /// cleanly, dropped, or closed by the server), the relay holds no more descriptors than before.
    @Test func noDescriptorOutlivesItsConnection() async throws {
        let relay = try RelayProcess()
        /// Open sockets of the relay (database readers may come and go; sockets must not stay).
        func openDescriptors() throws -> Int {
            let directory = "/proc/\(relay.process.processIdentifier)/fd"
            return try FileManager.default.contentsOfDirectory(atPath: directory).filter { entry in
                (try? FileManager.default.destinationOfSymbolicLink(atPath: directory + "/" + entry))?.hasPrefix(
                    "socket:")
                    == true
            }.count
        }
        _ = try await relay.request("GET", "/v1/users/judy/messages")  // opens the first reader
        let before = try openDescriptors()
        for round in 0..<30 {
            let client = try await connect(relay, user: "judy", device: "d\(round)")
            _ = try client.nextJSON()
            switch round % 3 {
            case 0: client.close()
            case 1: client.abort()
            default: try client.sendRaw([0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F])  // unmasked: server closes
            }
            _ = try? client.waitForClose()
        }
        // Closing is asynchronous: wait for it.
        #expect(
            try await eventually { try openDescriptors() <= before }, "\((try? openDescriptors()) ?? -1) > \(before)")
    }

    @Test func handshakeAndAuthErrors() async throws {
        let relay = try RelayProcess()
        // No token, a server key instead of a client token, a bad token.
        #expect(throws: WebSocketTestClient.Failure.self) { try WebSocketTestClient(port: relay.port, path: "/v1/ws") }
        let noToken = try await relay.request("GET", "/v1/ws", token: nil, headers: Self.upgradeHeaders)
        #expect(noToken.status == 401)
        let serverKey = try await relay.request("GET", "/v1/ws", headers: Self.upgradeHeaders)
        #expect(serverKey.status == 403)
        let token = try await relay.token(userId: "hal")
        var oldVersion = Self.upgradeHeaders
        oldVersion["Sec-WebSocket-Version"] = "8"
        let version = try await relay.request("GET", "/v1/ws", token: token, headers: oldVersion)
        #expect(version.status == 426)
        #expect(version.headers["sec-websocket-version"] == "13")
        let plain = try await relay.request("GET", "/v1/ws", token: token)
        #expect(plain.status == 400)
        #expect(plain.errorCode == "bad_handshake")
    }

    static let upgradeHeaders = [
        "Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    ]

    /// Malformed bytes get the right close code, and everyone else keeps being served.
    @Test func malformedFramesGetTheRightCloseCode() async throws {
        let relay = try RelayProcess(arguments: ["--max-ws-message-bytes", "1024"])
        let bystander = try await connect(relay, user: "ivan", device: "bystander")
        _ = try bystander.nextJSON()
        _ = try bystander.nextJSON()
        let mask: [UInt8] = [1, 2, 3, 4]
        let cases: [(String, [UInt8], UInt16)] = [
            ("unmasked frame", WebSocketFrame(opcode: .text, payload: Array("{}".utf8)).encoded(), 1002),
            ("reserved opcode", [0x83, 0x80] + mask, 1002),
            ("RSV bit", [0xC1, 0x80] + mask, 1002),
            ("bad UTF-8", WebSocketFrame(opcode: .text, payload: [0x7B, 0xFF, 0x7D]).encoded(maskKey: mask), 1007),
            (
                "oversized",
                WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 0, count: 2000)).encoded(maskKey: mask),
                1009
            ),
            ("binary frame", WebSocketFrame(opcode: .binary, payload: [1]).encoded(maskKey: mask), 1003),
            ("not JSON", WebSocketFrame(opcode: .text, payload: Array("hello".utf8)).encoded(maskKey: mask), 1008),
        ]
        for (name, bytes, code) in cases {
            let client = try await connect(relay, user: "ivan", device: "attacker")
            _ = try client.nextJSON()
            try client.sendRaw(bytes)
            var closedWith: UInt16?
            while closedWith == nil {
                if case .closed(let received) = try client.next() { closedWith = received }
            }
            #expect(closedWith == code, "\(name)")
        }
        // A truncated frame followed by silence, and a half-open connection, do not disturb others.
        let truncated = try await connect(relay, user: "ivan", device: "truncated")
        try truncated.sendRaw([0x81, 0xFE, 0x01])
        let halfOpen = try await connect(relay, user: "ivan", device: "half-open")
        halfOpen.abort()
        _ = try await post(relay, "still-serving", to: ["ivan"])
        #expect(try bystander.nextJSON()["id"] as? String == "still-serving")
    }

    /// A read that ends in a protocol error still gets the answers to the frames before it
    /// (RFC 6455 §7.1.7 fails the connection at the bad frame, not before it): here the
    /// `refreshed` answer, then 1002.
    @Test func framesBeforeAProtocolErrorAreAnsweredFirst() async throws {
        let relay = try RelayProcess()
        let client = try await connect(relay, user: "judy")
        _ = try client.nextJSON()  // welcome
        let token = try await relay.token(userId: "judy", deviceId: "phone")
        let mask: [UInt8] = [1, 2, 3, 4]
        let refresh = WebSocketFrame(opcode: .text, payload: Array(#"{"type":"refresh","token":"\#(token)"}"#.utf8))
        try client.sendRaw(
            refresh.encoded(maskKey: mask) + [0xA1, 0x80] + mask  // RSV2 set
                + WebSocketFrame(opcode: .ping, payload: [7]).encoded(maskKey: mask))
        var types: [String] = []
        var closedWith: UInt16?
        while closedWith == nil {
            switch try client.next() {
            case .text(let text):
                let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]
                types.append(object?["type"] as? String ?? "?")
            case .binary: types.append("binary")
            case .closed(let code): closedWith = code
            }
        }
        #expect(types.last == "refreshed")
        #expect(closedWith == 1002)
    }
}

actor StopFlag {
    private(set) var isSet = false
    func set() { isSet = true }
}
