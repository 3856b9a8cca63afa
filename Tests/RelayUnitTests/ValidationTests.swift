import RelayCore
import Testing

@Suite struct IncomingMessageTests {
    func decode(_ text: String, maxPayload: Int = 1024) throws(ValidationError) -> IncomingMessage {
        guard let json = try? JSONParser.parse(Array(text.utf8)) else {
            throw ValidationError(.invalidField, field: "$", "test input is not JSON")
        }
        return try IncomingMessage(json: json, maxPayloadBytes: maxPayload, defaultTTLSeconds: 600)
    }

    @Test func decodesAFullMessage() throws {
        let message = try decode(
            #"{"id":"m-1","recipients":["a","b","a"],"payload":{"t":"hi"},"conversationId":"c","senderId":"s","#
                + #""push":{"title":"T","body":"B","data":{"k":1}},"ttl":60,"priority":"high","collapseKey":"chat-c"}"#)
        #expect(message.recipients == ["a", "b"])  // duplicates dropped, order kept
        #expect(String(decoding: message.payload, as: UTF8.self) == #"{"t":"hi"}"#)
        #expect(message.ttlSeconds == 60)
        #expect(message.priority == .high)
        #expect(message.collapseKey == "chat-c")
    }

    @Test func defaultsApply() throws {
        let message = try decode(#"{"id":"m","recipients":["a"],"payload":{}}"#)
        #expect(message.ttlSeconds == 600)
        #expect(message.priority == .normal)
        #expect(message.push == nil)
    }

    @Test(arguments: [
        (#"[]"#, "$"),
        (#"{"recipients":["a"],"payload":{}}"#, "id"),
        (#"{"id":"","recipients":["a"],"payload":{}}"#, "id"),
        (#"{"id":5,"recipients":["a"],"payload":{}}"#, "id"),
        (#"{"id":"a/b","recipients":["a"],"payload":{}}"#, "id"),
        (#"{"id":"m","payload":{}}"#, "recipients"),
        (#"{"id":"m","recipients":[],"payload":{}}"#, "recipients"),
        (#"{"id":"m","recipients":"a","payload":{}}"#, "recipients"),
        (#"{"id":"m","recipients":["a b"],"payload":{}}"#, "recipients"),
        (#"{"id":"m","recipients":[1],"payload":{}}"#, "recipients"),
        (#"{"id":"m","recipients":["a"]}"#, "payload"),
        (#"{"id":"m","recipients":["a"],"payload":"text"}"#, "payload"),
        (#"{"id":"m","recipients":["a"],"payload":{},"ttl":0}"#, "ttl"),
        (#"{"id":"m","recipients":["a"],"payload":{},"ttl":1.5}"#, "ttl"),
        (#"{"id":"m","recipients":["a"],"payload":{},"ttl":1e40}"#, "ttl"),
        (#"{"id":"m","recipients":["a"],"payload":{},"priority":"urgent"}"#, "priority"),
        (#"{"id":"m","recipients":["a"],"payload":{},"push":{"title":3}}"#, "title"),
        (#"{"id":"m","recipients":["a"],"payload":{},"collapseKey":""}"#, "collapseKey"),
    ])
    func rejectsBadFields(_ text: String, _ field: String) {
        #expect {
            try decode(text)
        } throws: { error in
            (error as? ValidationError)?.field == field
        }
    }

    @Test func payloadLimitIsOnTheSerializedPayload() throws {
        let big = String(repeating: "x", count: 2000)
        #expect {
            try decode(#"{"id":"m","recipients":["a"],"payload":{"t":"\#(big)"}}"#)
        } throws: { error in
            (error as? ValidationError)?.kind == .payloadTooLarge
        }
    }

    @Test func recipientLimit() {
        let many = (0...IncomingMessage.maxRecipients).map { "\"u\($0)\"" }.joined(separator: ",")
        #expect(throws: ValidationError.self) { try decode(#"{"id":"m","recipients":[\#(many)],"payload":{}}"#) }
    }
}

@Suite struct CatchUpWindowTests {
    @Test func servesExactlyWhenTheCursorIsCovered() {
        let window = CatchUpWindow(after: 5, clientEpoch: "e", epoch: "e", headSeq: 9, prunedSeq: 5)
        #expect(window.complete)
        #expect(window.readAfter == 5)
    }

    @Test func flagsPrunedRanges() {
        let window = CatchUpWindow(after: 2, clientEpoch: nil, epoch: "e", headSeq: 9, prunedSeq: 4)
        #expect(!window.complete)
        #expect(window.readAfter == 2)
    }

    @Test func otherEpochOrFutureCursorReadsNothing() {
        #expect(CatchUpWindow(after: 1, clientEpoch: "old", epoch: "new", headSeq: 9, prunedSeq: 0).readAfter == nil)
        #expect(CatchUpWindow(after: 10, clientEpoch: nil, epoch: "e", headSeq: 9, prunedSeq: 0).readAfter == nil)
    }
}

@Suite struct AddressTests {
    @Test func parsesIPAddresses() {
        #expect(IPAddress("127.0.0.1")?.bytes == [127, 0, 0, 1])
        #expect(IPAddress("::1")?.bytes == [UInt8](repeating: 0, count: 15) + [1])
        #expect(IPAddress("::ffff:10.0.0.1")?.bytes == [UInt8](repeating: 0, count: 10) + [0xFF, 0xFF, 10, 0, 0, 1])
        #expect(IPAddress("fe80::1:2")?.bytes.count == 16)
        #expect(IPAddress("0.0.0.0")?.bytes == [0, 0, 0, 0])
        #expect(IPAddress("255.255.255.255")?.bytes == [255, 255, 255, 255])
        for bad in [
            "0x7f.0.0.1", "127.1", "0177.0.0.1", "256.0.0.1", "1::2::3", "::g", "1.2.3.4.5", "", "1.2.3.", ".1.2.3",
            "01.2.3.4", "1.2.3.1000", "1..2.3", "1.2.3.4 ", "１.2.3.4",
        ] {
            #expect(IPAddress(bad) == nil, "\(bad)")
        }
    }

    @Test func allowListMatchesHostsSuffixesAndNetworks() throws {
        let list = try HostAllowList.parse(["push.example.com", "*.apns.test", "10.1.0.0/16", "::1", "fd00::/8"]).get()
        #expect(list.allows(host: "push.example.com", port: 443))
        #expect(list.allows(host: "PUSH.example.com", port: 443))
        #expect(!list.allows(host: "evil.push.example.com", port: 443))
        #expect(list.allows(host: "a.apns.test", port: 443))
        #expect(!list.allows(host: "apns.test", port: 443))
        #expect(list.allows(host: "10.1.200.3", port: 443))
        #expect(!list.allows(host: "10.2.0.1", port: 443))
        #expect(list.allows(host: "[::1]", port: 443))
        #expect(list.allows(host: "fd12::1", port: 443))
        #expect(!list.allows(host: "127.0.0.1", port: 443))
        #expect(!list.allows(host: "0x0a.1.0.1", port: 443))
    }

    /// An entry without a port allows 80 and 443 only; `:N` that port, `:*` any (item 5 of the
    /// hardening round: allowing loopback must not open every service on it).
    @Test func allowListEntriesCarryPorts() throws {
        let list = try HostAllowList.parse([
            "push.example.com", "127.0.0.1:9000", "[::1]:9001", "gw.example.net:*", "10.0.0.0/8:8443",
            "[fd00::]/8:7000", "*.apns.test:443",
        ]).get()
        #expect(list.allows(host: "push.example.com", port: 443))
        #expect(list.allows(host: "push.example.com", port: 80))
        #expect(!list.allows(host: "push.example.com", port: 8080))
        #expect(list.allows(host: "127.0.0.1", port: 9000))
        #expect(!list.allows(host: "127.0.0.1", port: 2375))
        #expect(!list.allows(host: "127.0.0.1", port: 80))
        #expect(list.allows(host: "[::1]", port: 9001))
        #expect(!list.allows(host: "[::1]", port: 9000))
        #expect(list.allows(host: "gw.example.net", port: 1))
        #expect(list.allows(host: "10.9.9.9", port: 8443))
        #expect(!list.allows(host: "10.9.9.9", port: 443))
        #expect(list.allows(host: "fd00::5", port: 7000))
        #expect(list.allows(host: "x.apns.test", port: 443))
        #expect(!list.allows(host: "x.apns.test", port: 80))
        for bad in ["127.0.0.1:0", "127.0.0.1:70000", "host:abc", "[::1", "[::1]x", "::1]:80", "a:b:c", ":80"] {
            #expect((try? HostAllowList.parse([bad]).get()) == nil, "\(bad)")
        }
        #expect(try HostAllowList.parse(["::1", "fd00::/8"]).get().allows(host: "::1", port: 443))
    }

    @Test func pushURLs() throws {
        let url = try PushURL("https://Push.Example.com:8443/v1/push?x=1#frag")
        #expect(url.host == "push.example.com")
        #expect(url.port == 8443)
        #expect(url.target == "/v1/push?x=1")
        #expect(try PushURL("http://[::1]/p").host == "::1")
        #expect(try PushURL("http://127.0.0.1").port == 80)
        for bad in [
            "ftp://h/x", "http://user:pw@h/", "http:///x", "http://h:0/", "http://h:99999/", "h/x", "http://h /x",
        ] {
            #expect(throws: ValidationError.self, "\(bad)") { try PushURL(bad) }
        }
    }

    @Test func timestampsFormatAsRFC3339() {
        #expect(Timestamp(milliseconds: 0).rfc3339 == "1970-01-01T00:00:00.000Z")
        #expect(Timestamp(milliseconds: 1_795_976_799_678).rfc3339 == "2026-11-29T18:26:39.678Z")
        #expect(Timestamp(milliseconds: 951_782_400_001).rfc3339 == "2000-02-29T00:00:00.001Z")
        // Four-digit years take a fast path; the years beside them, the general one.
        #expect(Timestamp(milliseconds: 253_402_300_799_999).rfc3339 == "9999-12-31T23:59:59.999Z")
        #expect(Timestamp(milliseconds: 253_402_300_800_000).rfc3339 == "10000-01-01T00:00:00.000Z")
        #expect(Timestamp(milliseconds: -62_167_219_200_000).rfc3339 == "0000-01-01T00:00:00.000Z")
        #expect(Timestamp(milliseconds: -62_167_219_200_001).rfc3339 == "-0001-12-31T23:59:59.999Z")
    }
}

@Suite struct PresenceDebouncerTests {
    func at(_ ms: Int64) -> Timestamp { Timestamp(milliseconds: ms) }

    @Test func reportsARealChangeOnceAfterTheDelay() {
        var debouncer = PresenceDebouncer(delayMilliseconds: 1000)
        debouncer.observe(userId: "a", online: true, at: at(0))
        #expect(debouncer.due(at: at(999)).isEmpty)
        #expect(debouncer.due(at: at(1000)) == [.init(userId: "a", online: true, at: at(0))])
        #expect(debouncer.due(at: at(5000)).isEmpty)
        debouncer.observe(userId: "a", online: false, at: at(6000))
        #expect(debouncer.due(at: at(7000)) == [.init(userId: "a", online: false, at: at(6000))])
    }

    @Test func flappingWithinTheDelayReportsNothing() {
        var debouncer = PresenceDebouncer(delayMilliseconds: 1000)
        debouncer.observe(userId: "a", online: true, at: at(0))
        _ = debouncer.due(at: at(1000))
        for t in stride(from: Int64(2000), to: 3000, by: 100) {
            debouncer.observe(userId: "a", online: t % 200 != 0, at: at(t))  // off, on, off, on …
        }
        debouncer.observe(userId: "a", online: true, at: at(3000))
        #expect(debouncer.due(at: at(10_000)).isEmpty)
        #expect(debouncer.nextDue == nil)
    }

    @Test func aRepeatedObservationKeepsTheFirstTime() {
        var debouncer = PresenceDebouncer(delayMilliseconds: 1000)
        debouncer.observe(userId: "a", online: true, at: at(0))
        debouncer.observe(userId: "a", online: true, at: at(500))
        #expect(debouncer.nextDue == at(1000))
        #expect(debouncer.due(at: at(1000)).first?.at == at(0))
    }
}
