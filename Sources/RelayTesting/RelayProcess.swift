package import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A real `pushrelay serve` process on an ephemeral port with its own temporary database,
/// for end-to-end tests. Stops (SIGKILL) in `deinit` if the test did not stop it.
package final class RelayProcess: @unchecked Sendable {
    package struct LaunchError: Error, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    /// The server key every test relay is started with.
    package static let serverKey = "test-server-key-0123456789"

    package let directory: URL
    package let databasePath: String
    package private(set) var baseURL: URL
    package private(set) var process: Process
    private var extraArguments: [String]
    private var environment: [String: String]
    private let logPath: String

    /// The `pushrelay` binary: `PUSHRELAY_BIN`, or next to the test bundle in `.build/<config>/`.
    package static var binaryPath: String {
        if let path = ProcessInfo.processInfo.environment["PUSHRELAY_BIN"] { return path }
        var url = URL(fileURLWithPath: CommandLine.arguments.first ?? ".").deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = url.appendingPathComponent("pushrelay").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            url = url.deletingLastPathComponent()
        }
        return ".build/debug/pushrelay"
    }

    /// The PostgreSQL the end-to-end suite runs against when `PUSHRELAY_TEST_POSTGRES` names the
    /// directory of its socket (`Tests/Postgres/pg.sh start DIR`); nil: SQLite.
    package static let postgresDirectory = ProcessInfo.processInfo.environment["PUSHRELAY_TEST_POSTGRES"]

    /// A fresh database for one relay: a file in `directory` (SQLite), or a new PostgreSQL
    /// database when the suite runs on PostgreSQL.
    package static func freshDatabase(in directory: URL, name: String = "relay") throws -> String {
        guard let socketDirectory = postgresDirectory else {
            return directory.appendingPathComponent(name + ".sqlite").path
        }
        let database = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        let create = Process()
        create.executableURL = URL(fileURLWithPath: "/usr/bin/createdb")
        create.arguments = ["-h", socketDirectory, "-p", "5432", "-U", "postgres", database]
        try create.run()
        create.waitUntilExit()
        guard create.terminationStatus == 0 else { throw LaunchError(description: "createdb failed") }
        return "postgresql:///\(database)?host=\(socketDirectory)&port=5432&user=postgres"
    }

    /// Starts a relay. `arguments` are extra flags (e.g. `["--retention-s", "1"]`).
    package init(arguments: [String] = [], environment: [String: String] = [:], directory: URL? = nil) throws {
        let dir =
            directory
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("pushrelay-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        self.directory = dir
        databasePath = try Self.freshDatabase(in: dir)
        logPath = dir.appendingPathComponent("relay.log").path
        extraArguments = arguments
        self.environment = environment
        baseURL = URL(fileURLWithPath: "/")
        process = Process()
        try launch(port: 0)
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    private func launch(port: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binaryPath)
        process.arguments =
            [
                "serve", "--listen", "127.0.0.1:\(port)", "--db", databasePath, "--server-keys", Self.serverKey,
                "--client-token-secret", "test-client-token-secret-0123456789abcdef",
                // Tests drive clients much faster than people do; the limiter is tested on its own.
                "--rate-limit-client-per-s", "0",
                // Local webhook receivers on ephemeral ports (the default allows nothing local).
                "--push-allowed-hosts", "127.0.0.1:*,[::1]:*",
            ] + extraArguments
        var env = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("PUSHRELAY_") }
        env.merge(environment) { $1 }
        process.environment = env
        let stdout = Pipe()
        process.standardOutput = stdout
        if !FileManager.default.fileExists(atPath: logPath) {
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        log.seekToEndOfFile()
        process.standardError = log
        try process.run()
        self.process = process
        // The first stdout line names the bound URL (a sanitized build on a busy machine takes seconds).
        let deadline = Date().addingTimeInterval(60)
        var buffer = Data()
        while Date() < deadline {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty {
                guard process.isRunning else { break }
                continue
            }
            buffer.append(chunk)
            if let text = String(data: buffer, encoding: .utf8), let range = text.range(of: "listening on ") {
                let rest = text[range.upperBound...]
                if let end = rest.firstIndex(of: "\n"), let url = URL(string: String(rest[..<end])) {
                    baseURL = url
                    return
                }
            }
        }
        throw LaunchError(description: "relay did not start: \(logText)")
    }

    /// Everything the relay wrote to stderr so far.
    package var logText: String {
        (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
    }

    package var port: Int { baseURL.port ?? 0 }

    /// `kill -9`: no shutdown code runs.
    package func crash() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM and wait; returns the exit status.
    @discardableResult
    package func stop() -> Int32 {
        guard process.isRunning else { return process.terminationStatus }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// Starts the relay again on the same database (and the same port when it is free).
    package func restart() throws {
        if process.isRunning { stop() }
        do {
            try launch(port: port)
        } catch {
            try launch(port: 0)
        }
    }

    // MARK: HTTP

    package struct Response: Sendable {
        package var status: Int
        package var headers: [String: String]
        package var body: Data

        package var json: Any? { try? JSONSerialization.jsonObject(with: body) }
        package var object: [String: Any] { (json as? [String: Any]) ?? [:] }
        package var text: String { String(decoding: body, as: UTF8.self) }
        /// `error.code` of an error answer.
        package var errorCode: String? { (object["error"] as? [String: Any])?["code"] as? String }
    }

    /// One HTTP request; `token` defaults to the server key, pass `nil` for none; `timeout` in
    /// seconds (a large batch under a sanitizer on a busy machine takes minutes).
    package func request(
        _ method: String, _ path: String, json: Any? = nil, rawBody: Data? = nil, token: String? = serverKey,
        headers: [String: String] = [:], timeout: Double = 30
    ) async throws -> Response {
        try await Self.request(
            baseURL, method, path, json: json, rawBody: rawBody, token: token, headers: headers, timeout: timeout)
    }

    /// One HTTP request to the relay at `baseURL` (a process, or one running in the test).
    package static func request(
        _ baseURL: URL, _ method: String, _ path: String, json: Any? = nil, rawBody: Data? = nil,
        token: String? = serverKey, headers: [String: String] = [:], timeout: Double = 30
    ) async throws -> Response {
        guard let url = URL(string: path, relativeTo: baseURL) else {
            throw LaunchError(description: "bad path \(path)")
        }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.timeoutInterval = timeout
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let json {
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        if let rawBody { request.httpBody = rawBody }
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await Self.session.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw LaunchError(description: "not HTTP") }
        var headerMap: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            headerMap[String(describing: name).lowercased()] = String(describing: value)
        }
        return Response(status: http.statusCode, headers: headerMap, body: data)
    }

    /// A client token for `userId` minted by the relay itself.
    package func token(userId: String, deviceId: String = "device-1") async throws -> String {
        try await Self.token(baseURL, userId: userId, deviceId: deviceId)
    }

    /// A client token for `userId` minted by the relay at `baseURL`.
    package static func token(_ baseURL: URL, userId: String, deviceId: String) async throws -> String {
        let response = try await request(
            baseURL, "POST", "/v1/tokens", json: ["userId": userId, "deviceId": deviceId])
        guard let token = response.object["token"] as? String else {
            throw LaunchError(description: "no token: \(response.text)")
        }
        return token
    }

    static let session: URLSession = {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpMaximumConnectionsPerHost = 16
        configuration.timeoutIntervalForRequest = 600  // each request sets its own (30 s unless it says)
        return URLSession(configuration: configuration)
    }()
}
