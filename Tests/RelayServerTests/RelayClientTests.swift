import Foundation
import RelayClient
import RelayLocks
import RelayTesting
import Testing

/// The client SDK against the real relay.
@Suite(.serialized) struct RelayClientTests {
    func client(
        _ relay: RelayProcess, user: String, device: String = "phone", cursor: any CursorStore = InMemoryCursorStore(),
        app: String? = nil, tokens: (@Sendable (Bool) async throws -> String)? = nil
    ) -> RelayClient {
        var configuration = RelayClient.Configuration(
            relayURL: relay.baseURL, userId: user, deviceId: device,
            tokenProvider: tokens ?? { _ in try await relay.token(userId: user, deviceId: device) })
        configuration.backoff = Backoff(base: 0.05, cap: 0.5)
        configuration.cursorStore = cursor
        configuration.app = app
        return RelayClient(configuration: configuration)
    }

    func post(_ relay: RelayProcess, _ id: String, to user: String) async throws {
        let response = try await relay.request(
            "POST", "/v1/messages", json: ["id": id, "recipients": [user], "payload": ["id": id]])
        #expect(response.status == 202)
    }

    /// Collects `count` messages (or throws after `seconds`: long, for a busy machine).
    func collect(_ client: RelayClient, _ count: Int, within seconds: Double = 60) async throws -> [RelayMessage] {
        try await withThrowingTaskGroup(of: [RelayMessage].self) { group in
            group.addTask {
                var received: [RelayMessage] = []
                for await message in client.messages {
                    received.append(message)
                    if received.count == count { break }
                }
                return received
            }
            group.addTask {
                try await Task.sleep(nanoseconds: UInt64(seconds * 1e9))
                throw CancellationError()
            }
            let result = try await group.next() ?? []
            group.cancelAll()
            return result
        }
    }

    func waitForState(_ client: RelayClient, _ wanted: ConnectionState) async throws {
        let reached = await eventually { await client.state == wanted }
        if !reached { Issue.record("state never became \(wanted)") }
    }

    @Test func theAppRegistersItsPushToken() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("sdk-push-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // APNs only: a relay without FCM credentials says so below.
        let apnsOnly = try PushCredentials(in: directory).environment.filter { $0.key.hasPrefix("PUSHRELAY_APNS") }
        let relay = try RelayProcess(environment: apnsOnly)
        let client = client(relay, user: "ann", device: "iphone")
        // The chat server registered the device content-free, for iOS: the app's own token keeps that.
        let registered = try await relay.request(
            "PUT", "/v1/users/ann/devices/iphone",
            json: ["apns": ["token": String(repeating: "0", count: 64)], "contentFree": true, "platform": "ios"])
        #expect(registered.status == 201, "\(registered.text)")
        let deviceToken = Data((0..<32).map { UInt8($0 * 7 & 0xFF) })
        let voipToken = Data((0..<32).map { UInt8($0 * 5 & 0xFF) })
        try await client.setPushToken(.apns(deviceToken: deviceToken, environment: .sandbox, voipToken: voipToken))
        let devices = try await relay.request("GET", "/v1/users/ann/devices").object["devices"] as? [[String: Any]]
        let apns = devices?.first?["apns"] as? [String: Any]
        #expect(apns?["token"] as? String == deviceToken.map { String(format: "%02x", $0) }.joined())
        #expect(apns?["voipToken"] as? String == voipToken.map { String(format: "%02x", $0) }.joined())
        #expect(apns?["environment"] as? String == "sandbox")
        #expect(devices?.first?["contentFree"] as? Bool == true)
        #expect(devices?.first?["platform"] as? String == "ios")
        await #expect(throws: PushTokenError.refused(status: 400, code: "transport_unavailable")) {
            try await client.setPushToken(.fcm("abc:APA91b"))
        }
        // A build of another app names it: this relay has no app 'beta'.
        await #expect(throws: PushTokenError.refused(status: 400, code: "transport_unavailable")) {
            try await self.client(relay, user: "ann", device: "iphone", app: "beta")
                .setPushToken(.apns(deviceToken: deviceToken))
        }
    }

    @Test func messagesArriveOnceInOrder() async throws {
        let relay = try RelayProcess()
        try await post(relay, "before-1", to: "amy")
        let client = client(relay, user: "amy")
        await client.connect()
        try await waitForState(client, .live)
        for n in 1...20 { try await post(relay, "live-\(n)", to: "amy") }
        let messages = try await collect(client, 21)
        #expect(messages.map(\.seq) == Array(1...21))
        #expect(messages.first?.id == "before-1")
        #expect(String(decoding: messages[5].payload, as: UTF8.self) == #"{"id":"live-5"}"#)
        await client.disconnect()
    }

    /// Signals: the app's `send(signal:)` reaches the relay on the socket, and signals the chat
    /// server relays arrive on `signals` with their `data` as the exact bytes sent.
    @Test func signalsGoOutAndComeIn() async throws {
        let relay = try RelayProcess()
        let client = client(relay, user: "sia")
        await expectSignalError(.notConnected) {
            try await client.send(signal: RelaySignal(conversationId: "c", name: "typing"))
        }
        await client.connect()
        try await waitForState(client, .live)
        try await client.send(
            signal: RelaySignal(
                conversationId: "!room:example.org", name: "typing", data: Data(#"{"state":"started"}"#.utf8)))
        await expectSignalError(.invalid) {
            try await client.send(signal: RelaySignal(conversationId: "c", name: "typing", data: Data("[1]".utf8)))
        }
        let incoming = Task {
            var iterator = client.signals.makeAsyncIterator()
            return await iterator.next()
        }
        let response = try await relay.request(
            "POST", "/v1/signals",
            rawBody: Data(
                #"{"recipients":["sia"],"conversationId":"c1","name":"typing","senderId":"tom","data":{"n":1.10,"p":"a/b"}}"#
                    .utf8), headers: ["Content-Type": "application/json"])
        #expect(response.status == 200)
        let signal = await incoming.value
        #expect(signal?.conversationId == "c1")
        #expect(signal?.senderId == "tom")
        #expect(signal.flatMap { $0.data.map { String(decoding: $0, as: UTF8.self) } } == #"{"n":1.10,"p":"a/b"}"#)
        // The relay counts the app's signal as it reads it from the socket: wait for it.
        #expect(
            try await eventually {
                try await relay.request("GET", "/metrics").text.contains(
                    #"pushrelay_signals_total{outcome="received"} 1"#)
            })
        await client.disconnect()
    }

    private func expectSignalError(_ expected: RelaySignalError, _ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("no error; expected \(expected)")
        } catch {
            #expect(error as? RelaySignalError == expected)
        }
    }

    /// `kill -9` and restart mid-stream: the client reconnects by itself and the app sees every
    /// message exactly once, in order.
    @Test func survivesARelayCrashWithoutGapsOrDuplicates() async throws {
        let relay = try RelayProcess()
        let client = client(relay, user: "ben")
        await client.connect()
        try await waitForState(client, .live)
        let collector = Task { try await collect(client, 60, within: 120) }
        for n in 1...20 { try await post(relay, "a\(n)", to: "ben") }
        relay.crash()
        try relay.restart()
        for n in 1...20 { try await post(relay, "b\(n)", to: "ben") }
        try await waitForState(client, .live)
        for n in 1...20 { try await post(relay, "c\(n)", to: "ben") }
        let messages = try await collector.value
        #expect(messages.map(\.seq) == Array(1...60))
        #expect(Set(messages.map(\.id)).count == 60)
        await client.disconnect()
    }

    @Test func backgroundThenForegroundCatchesUpExactlyTheMissedRange() async throws {
        let relay = try RelayProcess()
        let client = client(relay, user: "cat")
        await client.connect()
        try await waitForState(client, .live)
        for n in 1...3 { try await post(relay, "m\(n)", to: "cat") }
        #expect(try await collect(client, 3).map(\.seq) == [1, 2, 3])
        func online() async throws -> Bool? {
            try await relay.request("GET", "/v1/users/cat/presence").object["online"] as? Bool
        }
        #expect(try await online() == true)

        await client.enterBackground()
        #expect(try await eventually { try await online() == false })
        for n in 4...8 { try await post(relay, "m\(n)", to: "cat") }

        await client.enterForeground()
        #expect(try await collect(client, 5).map(\.seq) == [4, 5, 6, 7, 8])
        try await waitForState(client, .live)
        #expect(try await eventually { try await online() == true })
        await client.disconnect()
    }

    @Test func expiredTokenIsRefreshedThroughTheProvider() async throws {
        let relay = try RelayProcess()
        let calls = LockedValue<[Bool]>([])
        let expired = AuthAndInputEndToEndTests.hs256(
            ["sub": "dan", "did": "phone", "exp": Int(Date().timeIntervalSince1970) - 600],
            secret: "test-client-token-secret-0123456789abcdef")
        let client = client(relay, user: "dan") { forceRefresh in
            calls.withLock { $0.append(forceRefresh) }
            return forceRefresh ? try await relay.token(userId: "dan", deviceId: "phone") : expired
        }
        await client.connect()
        try await waitForState(client, .live)
        #expect(calls.withLock { $0 }.prefix(2) == [false, true])
        try await post(relay, "after-refresh", to: "dan")
        #expect(try await collect(client, 1).first?.id == "after-refresh")
        await client.disconnect()
    }

    /// The app gets each payload byte for byte as the relay sent it — members in their order,
    /// `1.10` not `1.1`, `/` not `\/` — in a catch-up and live alike, and a member named
    /// `payload` inside a payload does not confuse it.
    @Test func payloadsArriveAsTheExactBytes() async throws {
        let relay = try RelayProcess()
        let body = #"{"b":1.10,"a":"x/y","n":[1E3,-0.0],"nested":{"payload":5}}"#
        func send(_ id: String) async throws {
            let response = try await relay.request(
                "POST", "/v1/messages",
                rawBody: Data(#"{"id":"\#(id)","recipients":["pat"],"payload":\#(body)}"#.utf8),
                headers: ["Content-Type": "application/json"])
            #expect(response.status == 202)
        }
        try await send("before")  // comes in the catch-up
        let client = client(relay, user: "pat")
        await client.connect()
        try await waitForState(client, .live)
        try await send("live")
        let messages = try await collect(client, 2)
        #expect(messages.map(\.id) == ["before", "live"])
        for message in messages { #expect(String(decoding: message.payload, as: UTF8.self) == body) }
        struct Shape: Decodable { var a: String }
        #expect(try messages[0].decodePayload(as: Shape.self).a == "x/y")
        await client.disconnect()
    }

    @Test func acksAreBatchedAndReachTheRelay() async throws {
        let relay = try RelayProcess()
        let client = client(relay, user: "eve")
        await client.connect()
        try await waitForState(client, .live)
        for n in 1...5 { try await post(relay, "e\(n)", to: "eve") }
        for message in try await collect(client, 5) { await client.ack(message.seq) }
        // The batched ack goes out within `ackInterval` (0.25 s); a busy machine may take longer.
        #expect(
            try await eventually {
                let state = try await relay.request("GET", "/v1/messages/e5")
                return (state.object["recipients"] as? [[String: Any]])?.first?["state"] as? String == "acked"
            })
        await client.disconnect()
    }

    @Test func theCursorSurvivesAnAppRestart() async throws {
        let relay = try RelayProcess()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("cursor-\(UUID().uuidString).json")
        let first = client(relay, user: "fox", cursor: FileCursorStore(url: file))
        await first.connect()
        try await waitForState(first, .live)
        for n in 1...3 { try await post(relay, "f\(n)", to: "fox") }
        _ = try await collect(first, 3)
        await first.disconnect()
        for n in 4...5 { try await post(relay, "f\(n)", to: "fox") }
        let second = client(relay, user: "fox", cursor: FileCursorStore(url: file))  // the app restarted
        await second.connect()
        #expect(try await collect(second, 2).map(\.seq) == [4, 5])
        await second.disconnect()
    }
}

/// The reconnect schedule, on a fake clock with the relay unreachable.
@Suite struct ReconnectScheduleTests {
    final class FakeClock: RelayClientClock, @unchecked Sendable {
        let sleeps = LockedValue<[Double]>([])
        func now() -> Double { 0 }
        func sleep(seconds: Double) async throws {
            sleeps.withLock { $0.append(seconds) }
            await Task.yield()
        }
    }

    struct Unreachable: RelayTransport {
        func connect(url: URL, headers: [String: String]) async throws -> any RelayConnection {
            throw RelayTransportError.connectionFailed("refused")
        }
    }

    @Test func attemptsFollowBackoffWithinJitterBounds() async throws {
        let clock = FakeClock()
        let randoms = LockedValue([0.0, 1.0, 0.5, 0.25, 1.0, 0.75, 1.0, 1.0, 0.1, 1.0])
        var configuration = RelayClient.Configuration(
            relayURL: URL(fileURLWithPath: "/"), userId: "u", tokenProvider: { _ in "token" })
        configuration.transport = Unreachable()
        configuration.clock = clock
        configuration.pollWhenSocketFails = false
        configuration.backoff = Backoff(base: 1, cap: 30)
        configuration.random = { randoms.withLock { $0.isEmpty ? 1 : $0.removeFirst() } }
        let client = RelayClient(configuration: configuration)
        await client.connect()
        while clock.sleeps.withLock({ $0.count }) < 10 { await Task.yield() }
        await client.disconnect()
        let sleeps = Array(clock.sleeps.withLock { $0 }.prefix(10))
        // ceiling(attempt) = min(30, 2^(attempt-1)); delay = ceiling × random.
        let expected = zip(
            [1.0, 2, 4, 8, 16, 30, 30, 30, 30, 30], [0.0, 1.0, 0.5, 0.25, 1.0, 0.75, 1.0, 1.0, 0.1, 1.0]
        ).map(*)
        #expect(sleeps == expected)
        for (attempt, delay) in sleeps.enumerated() {
            #expect(delay >= 0 && delay <= Backoff(base: 1, cap: 30).ceiling(attempt: attempt + 1))
        }
    }

    @Test func backoffCeilings() {
        let backoff = Backoff(base: 1, cap: 30)
        #expect((1...7).map { backoff.ceiling(attempt: $0) } == [1, 2, 4, 8, 16, 30, 30])
        #expect(backoff.ceiling(attempt: 1000) == 30)
        #expect(backoff.delay(attempt: 3, random: 0.5) == 2)
    }
}

/// A link that goes silent for good (no FIN, no RST) is found and replaced in seconds.
@Suite(.serialized) struct DeadLinkTests {
    @Test func aSilentlyDeadLinkIsReplacedAndNothingIsLost() async throws {
        let relay = try RelayProcess(arguments: ["--ping-interval-ms", "1000"])
        let proxy = try BlackHoleProxy(target: relay.port)
        defer { proxy.stop() }
        var configuration = RelayClient.Configuration(
            relayURL: URL(string: "http://127.0.0.1:\(proxy.port)")!, userId: "nat", deviceId: "phone",
            tokenProvider: { _ in try await relay.token(userId: "nat", deviceId: "phone") })
        configuration.backoff = Backoff(base: 0.05, cap: 0.5)
        let client = RelayClient(configuration: configuration)
        let tests = RelayClientTests()
        await client.connect()
        try await tests.post(relay, "before", to: "nat")
        #expect(try await tests.collect(client, 1).map(\.seq) == [1])
        proxy.blackHoleOpenConnections()
        let cut = Date()
        for n in 2...6 { try await tests.post(relay, "m\(n)", to: "nat") }
        // 6.5 s of silence, a check, a backoff of at most 0.5 s; the bound is generous for busy machines.
        let received = try await tests.collect(client, 5, within: 120)
        #expect(received.map(\.seq) == [2, 3, 4, 5, 6])
        print("dead link replaced, messages in hand after \(Date().timeIntervalSince(cut)) s")
        await client.disconnect()
    }
}
