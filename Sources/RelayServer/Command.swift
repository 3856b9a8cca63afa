internal import CLinux
import Foundation
import RelayCore
import RelayCrypto
import RelayStore

/// The `pushrelay` command line: `serve`, `migrate`, `token`, `server-key`, `check-config`.
package enum Command {
    static let usage = """
        usage: pushrelay <command> [--config FILE] [--setting value ...]

        commands:
          serve          run the relay (default)
          migrate        create or upgrade the database, then exit
          check-config   validate the configuration and print it (secrets redacted)
          token          print a client token: token --user USER --device DEVICE [--ttl SECONDS]
          server-key     print the server key in force (the configured one, or the generated one)
          ws-echo        serve a WebSocket echo endpoint (same codec and socket loop) for
                         conformance suites; no auth, any path; off unless run this way

        every setting can be a flag (--listen 127.0.0.1:8080), an environment variable
        (PUSHRELAY_LISTEN) or a key of the JSON config file (listen); flags win over the
        environment, which wins over the file. See README.md for the list.
        """

    /// Runs the command line and returns the process exit code.
    package static func main(arguments: [String], environment: [String: String]) -> Int32 {
        var arguments = arguments
        let command = arguments.first.map { $0.hasPrefix("-") ? "serve" : arguments.removeFirst() } ?? "serve"
        if command == "help" || arguments.contains("--help") || arguments.contains("-h") {
            print(usage)
            return 0
        }
        let config: RelayConfig
        let rest: [String]
        do {
            (config, rest) = try ConfigLoader.load(arguments: arguments, environment: environment)
        } catch {
            printError("configuration error: \(error)")
            return 2
        }
        let logger = Logger(level: LogLevel(rawValue: config.logLevel) ?? .info)
        do {
            switch command {
            case "serve": return try serve(config, logger)
            case "migrate":
                let store = try SQLiteStore(path: config.db, epochFor: { _ in "" })
                store.close()
                print("database \(config.db) is at the newest schema")
                return 0
            case "check-config":
                print(describe(config))
                return 0
            case "token": return try token(config, rest)
            case "ws-echo": return try echo(config, logger)
            case "server-key":
                let store = try SQLiteStore(path: config.db, epochFor: { _ in "" })
                defer { store.close() }
                print(try Secrets.resolve(config: config, store: store).serverKeys[0])
                return 0
            default:
                printError("unknown command '\(command)'\n\n\(usage)")
                return 2
            }
        } catch {
            printError("pushrelay: \(error)")
            return 1
        }
    }

    private static func serve(_ config: RelayConfig, _ logger: Logger) throws -> Int32 {
        var signals = blockStopSignals()
        // Keep freed heap memory instead of handing it back (and forth) to the kernel on every
        // request: glibc's trimming showed up as madvise + TLB shootdowns under load. RelayApp
        // trims once every few seconds instead.
        pr_malloc_keep_memory(256 << 20, 32 << 20)

        let app = try RelayApp(config: config, logger: logger)
        let url = try app.start()
        print("pushrelay listening on \(url)")
        fflush(nil)
        var received: Int32 = 0
        sigwait(&signals, &received)
        logger.info("signal received", ("signal", received == SIGTERM ? "SIGTERM" : "SIGINT"))
        app.shutdown()
        return 0
    }

    private static func echo(_ config: RelayConfig, _ logger: Logger) throws -> Int32 {
        var signals = blockStopSignals()
        let server = try EchoServer(config: config)
        print("pushrelay ws-echo listening on \(try server.start())")
        fflush(nil)
        var received: Int32 = 0
        sigwait(&signals, &received)
        server.stop()
        return 0
    }

    /// Blocks the stop signals in every thread (threads inherit the mask) so that `sigwait`
    /// takes them, and no signal handler ever runs inside a C library's callback.
    private static func blockStopSignals() -> sigset_t {
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGINT)
        sigaddset(&signals, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &signals, nil)
        signal(SIGPIPE, SIG_IGN)
        raiseFileLimit()
        return signals
    }

    /// Every WebSocket holds a descriptor: raise the soft limit to the hard one.
    private static func raiseFileLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    private static func token(_ config: RelayConfig, _ arguments: [String]) throws -> Int32 {
        func value(_ flag: String) -> String? {
            guard let index = arguments.firstIndex(of: flag), index + 1 < arguments.count else { return nil }
            return arguments[index + 1]
        }
        guard let user = value("--user"), Identifier.isValidUserOrDeviceId(user) else {
            printError("token needs --user USER (and usually --device DEVICE)")
            return 2
        }
        let device = value("--device")
        let ttl = value("--ttl").flatMap { Int64($0) } ?? 3600
        let store = try SQLiteStore(path: config.db, epochFor: { _ in "" })
        defer { store.close() }
        let secret = try Secrets.resolve(config: config, store: store).clientTokenSecret
        let codec = ClientTokenCodec(hmac: { Crypto.hmacSHA256(key: Array(secret.utf8), message: $0) })
        let now = Timestamp.now.seconds
        print(codec.encode(ClientClaims(userId: user, deviceId: device, expiresAt: now + ttl, issuedAt: now)))
        return 0
    }

    /// The effective configuration as JSON, with secrets replaced by a note.
    static func describe(_ config: RelayConfig) -> String {
        let secrets: Set<String> = ["serverKeys", "clientTokenSecret", "webhookSecret", "metricsKey"]
        var writer = JSONWriter()
        writer.beginObject()
        for setting in ConfigLoader.settings {
            writer.key(setting.key)
            let value = setting.read(config)
            if secrets.contains(setting.key) {
                let isSet = value != .null && value != .array([])
                writer.string(isSet ? "<set>" : (setting.key == "metricsKey" ? "<none>" : "<generated>"))
            } else {
                writer.value(value)
            }
        }
        writer.endObject()
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    private static func printError(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}
