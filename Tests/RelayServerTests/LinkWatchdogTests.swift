import Foundation
import RelayClient
import RelayLocks
import RelayTesting
import Testing

/// A silently dead link is found from the relay's ping interval, on an injected clock.
@Suite struct LinkWatchdogTests {
    @Test func silenceRuleAndClientPing() {
        var watchdog = LinkWatchdog(now: 100, pingInterval: 1)
        #expect(watchdog.silenceLimit == 6.5)  // 1 × 1.5 + 5
        #expect(watchdog.pingAfter == 3.75)  // halfway between the relay's ping and the limit
        #expect(watchdog.observe(count: 1, now: 101) == .none)  // traffic
        #expect(watchdog.observe(count: 1, now: 104.7) == .none)
        #expect(watchdog.observe(count: 1, now: 104.75) == .ping)
        #expect(watchdog.observe(count: 1, now: 105) == .none)  // one ping per silence
        #expect(watchdog.observe(count: 1, now: 107.5) == .dead)
        // Anything arriving resets the silence and allows the next ping.
        #expect(watchdog.observe(count: 2, now: 107.6) == .none)
        #expect(watchdog.observe(count: 2, now: 111.35) == .ping)
    }

    @Test func theRelaysDefaultIntervalWhenWelcomeIsSilent() {
        var watchdog = LinkWatchdog(now: 0)
        #expect(watchdog.silenceLimit == 42.5)  // 25 × 1.5 + 5
        #expect(watchdog.checkInterval == 5)
        watchdog.setPingInterval(1)
        #expect(watchdog.checkInterval == 0.8125)
        watchdog.setPingInterval(0)  // nonsense from a relay: the default
        #expect(watchdog.silenceLimit == 42.5)
        watchdog.setPingInterval(.infinity)
        #expect(watchdog.silenceLimit == 42.5)
    }

    /// A clock whose sleeps move time forward at once.
    final class SteppingClock: RelayClientClock, @unchecked Sendable {
        let time = LockedValue(0.0)
        func now() -> Double { time.withLock { $0 } }
        func sleep(seconds: Double) async throws {
            try Task.checkCancellation()
            time.withLock { $0 += seconds }
            await Task.yield()
        }
    }

    /// A connection that says `welcome` and then nothing, ever.
    final class SilentConnection: RelayConnection, @unchecked Sendable {
        let frames: AsyncThrowingStream<String, any Error>
        let sink: AsyncThrowingStream<String, any Error>.Continuation
        let clock: SteppingClock
        let pings = LockedValue<[Double]>([])
        let closedAt = LockedValue<Double?>(nil)

        init(welcome: String, clock: SteppingClock) {
            self.clock = clock
            (frames, sink) = AsyncThrowingStream.makeStream(of: String.self, throwing: (any Error).self)
            sink.yield(welcome)
        }
        func send(_ text: String) async throws {}
        func ping() async throws { pings.withLock { $0.append(clock.now()) } }
        func close() async {
            closedAt.withLock { $0 = $0 ?? clock.now() }
            sink.finish(throwing: RelayTransportError.closed(code: 1006))
        }
    }

    final class OneConnection: RelayTransport, Sendable {
        let connection: SilentConnection
        let used = LockedValue(false)
        init(connection: SilentConnection) { self.connection = connection }
        func connect(url: URL, headers: [String: String]) async throws -> any RelayConnection {
            let first = used.withLock { used in
                defer { used = true }
                return !used
            }
            guard first else { throw RelayTransportError.connectionFailed("gone") }
            return connection
        }
    }

    /// The client takes the interval from `welcome`, pings once, then closes the link.
    func deathTime(welcome: String) async throws -> (pings: [Double], closedAt: Double) {
        let clock = SteppingClock()
        let connection = SilentConnection(welcome: welcome, clock: clock)
        var configuration = RelayClient.Configuration(
            relayURL: URL(fileURLWithPath: "/"), userId: "u", tokenProvider: { _ in "token" })
        configuration.transport = OneConnection(connection: connection)
        configuration.clock = clock
        configuration.pollWhenSocketFails = false
        let client = RelayClient(configuration: configuration)
        await client.connect()
        while connection.closedAt.withLock({ $0 }) == nil { await Task.yield() }
        await client.disconnect()
        return (connection.pings.withLock { $0 }, connection.closedAt.withLock { $0 } ?? 0)
    }

    /// The ping goes out `pingAfter` into the silence and the close `silenceLimit` into it, each
    /// seen at the first check after (so their distance is known to within one check; when the
    /// welcome was read on this clock is not).
    @Test func theIntervalComesFromWelcome() async throws {
        let fast = try await deathTime(
            welcome: #"{"type":"welcome","epoch":"e","headSeq":0,"complete":true,"pingIntervalMs":1000}"#)
        #expect(fast.pings.count == 1)
        let fastGap = fast.closedAt - (fast.pings.first ?? 0)
        #expect(abs(fastGap - (6.5 - 3.75)) <= 0.8125, "ping to close: \(fastGap) s")
        let silent = try await deathTime(welcome: #"{"type":"welcome","epoch":"e","headSeq":0,"complete":true}"#)
        #expect(silent.pings.count == 1)
        let silentGap = silent.closedAt - (silent.pings.first ?? 0)
        #expect(abs(silentGap - (42.5 - 33.75)) <= 5, "ping to close: \(silentGap) s")
    }
}
