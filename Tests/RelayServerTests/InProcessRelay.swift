import Foundation
import RelayCore
import RelayLocks
import RelayServer
import RelaySettings
import RelayTelemetry
import RelayTesting

/// The relay built and started inside the test process (`RelayApp` on port 0, a fresh
/// database): the fast tier, where a test can look at the live side's and the store's state
/// directly instead of only through the API. Stopped in `deinit`.
final class InProcessRelay: @unchecked Sendable {
    let app: RelayApp
    let baseURL: URL
    let directory: URL

    /// `clock`: time the test stops or steps (wall and monotonic); nil, the system's.
    init(clock: SteppedClock? = nil, _ configure: (inout RelayConfig) -> Void = { _ in }) throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("inprocess-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        signal(SIGPIPE, SIG_IGN)  // (the relay's command line does this for the process)
        var config = RelayConfig()
        config.listen = "127.0.0.1:0"
        config.db = try RelayProcess.freshDatabase(in: directory)
        config.serverKeys = [RelayProcess.serverKey]
        configure(&config)
        let app = try RelayApp(config: config, logger: Logger(level: .warning), clock: clock?.relayClock ?? .system)
        do {
            guard let url = URL(string: try app.start()) else {
                throw RelayProcess.LaunchError(description: "the relay answered no URL")
            }
            baseURL = url
        } catch {
            app.shutdown()  // (no deinit for an object that never finished its init)
            throw error
        }
        self.app = app
    }

    deinit {
        app.shutdown()
        try? FileManager.default.removeItem(at: directory)
    }

    var port: Int { baseURL.port ?? 0 }

    func request(_ method: String, _ path: String, json: Any? = nil) async throws -> RelayProcess.Response {
        try await RelayProcess.request(baseURL, method, path, json: json)
    }

    /// A WebSocket of `user`'s `device` (close it before the relay goes: its shutdown waits up to
    /// a second for open sockets).
    func connect(user: String, device: String = "phone", after: Int? = nil) async throws -> WebSocketTestClient {
        let token = try await RelayProcess.token(baseURL, userId: user, deviceId: device)
        let client = try WebSocketTestClient(
            port: port, path: "/v1/ws?access_token=\(token)" + (after.map { "&after=\($0)" } ?? ""))
        return client
    }
}

/// A wall clock that stands still until the test moves it.
final class SteppedClock: Sendable {
    private let time = LockedValue(Timestamp.now)

    var now: Timestamp { time.withLock { $0 } }

    func advance(milliseconds: Int64) { time.withLock { $0 = Timestamp(milliseconds: $0.milliseconds + milliseconds) } }

    /// Both of the relay's clocks, stepped together (the monotonic one from the same origin).
    var relayClock: RelayClock { RelayClock(now: { self.now }, uptimeMs: { self.now.milliseconds }) }
}
