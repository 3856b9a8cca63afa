internal import CLinux
import Foundation
import RelayCore
import RelayCrypto
import RelaySettings
import RelayStore
import RelayTelemetry

/// The `pushrelay` command line. Strict: the command comes first, then settings and the
/// command's own options; anything unknown or malformed is a usage error (exit 2) that names it.
/// Run-time failures (bind, database) are one line on stderr and exit 1.
package enum Command {
    static let usage = """
        usage: pushrelay <command> [--config FILE] [--setting value ...] [options]

        commands:
          serve                 run the relay
          migrate               create or upgrade the database, then exit
          check-config          validate the configuration and print it (secrets redacted);
                                --show-secrets prints the server keys, client-token secret and
                                webhook secret in force instead (for the chat server's setup)
          token                 print a client token: token --user USER [--device DEVICE] [--ttl SECONDS]
          server-key            print the server key(s) in force (configured, else the database's); writes nothing
          generate-server-key   create the database's server key if it has none, and print it
          backup FILE           copy the database into FILE (a new file) while the relay runs
          ws-echo               serve a WebSocket echo endpoint (same codec and socket loop) for
                                conformance suites; no auth, any path; off unless run this way
          --version, --help

        every setting can be a flag (--listen 127.0.0.1:8080), an environment variable
        (PUSHRELAY_LISTEN) or a key of the JSON config file (listen; --config FILE or
        PUSHRELAY_CONFIG); flags win over the environment, which wins over the file.
        See docs/CONFIGURATION.md for the list.
        """

    static let usageLine = "usage: pushrelay <command> [--setting value ...] [options]   (pushrelay --help lists them)"

    /// A command line that cannot be run as written (exit 2, with the usage line).
    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs the command line and returns the process exit code.
    package static func main(arguments: [String], environment: [String: String]) -> Int32 {
        guard let command = arguments.first else {
            printError("pushrelay: no command given\n\(usageLine)")
            return 2
        }
        switch command {
        case "--help", "-h", "help":
            print(usage)
            return 0
        case "--version":
            print("pushrelay \(RelayConfig.version)")
            return 0
        default: break
        }
        guard commands.contains(command) else {
            printError(
                "pushrelay: "
                    + (command.hasPrefix("-")
                        ? "the command comes first: pushrelay <command> \(command) ..."
                        : "unknown command '\(command)'")
                    + "\n\(usageLine)")
            return 2
        }
        let rest = Array(arguments.dropFirst())
        if rest.contains("--help") || rest.contains("-h") {
            print(usage)
            return 0
        }
        do {
            let (config, options) = try ConfigLoader.load(arguments: rest, environment: environment)
            return try run(command, config, options)
        } catch let error as UsageError {
            printError("pushrelay: \(error)\n\(usageLine)")
            return 2
        } catch let error as ConfigLoader.Error {
            printError("pushrelay: configuration error: \(error)")
            return 2
        } catch {
            printError("pushrelay: \(error)")
            return 1
        }
    }

    private static func run(_ command: String, _ config: RelayConfig, _ options: [String]) throws -> Int32 {
        let logger = Logger(level: config.logLevel)
        switch command {
        case "serve":
            try Options.parse(options, values: [], switches: [])
            return try serve(config, logger)
        case "migrate":
            try Options.parse(options, values: [], switches: [])
            let store = try openStore(config)
            store.close()
            print("database \(config.dbForDisplay) is at the newest schema")
            return 0
        case "check-config":
            let parsed = try Options.parse(options, values: [], switches: ["--show-secrets"])
            _ = try PushServices(config: config)  // the credential files load
            print(parsed.switches.contains("--show-secrets") ? try describeSecrets(config) : describe(config))
            return 0
        case "token":
            return try token(config, try Options.parse(options, values: ["--user", "--device", "--ttl"], switches: []))
        case "server-key":
            try Options.parse(options, values: [], switches: [])
            let keys = try Secrets.inForce(config: config).serverKeys
            guard !keys.isEmpty else {
                printError(
                    "pushrelay: no server key yet: set PUSHRELAY_SERVER_KEYS, or run 'pushrelay generate-server-key'")
                return 1
            }
            print(keys.joined(separator: "\n"))
            return 0
        case "generate-server-key":
            try Options.parse(options, values: [], switches: [])
            let store = try openStore(config)
            defer { store.close() }
            print(try Secrets.resolve(config: RelayConfig.withoutServerKeys(config), store: store).serverKeys[0])
            if !config.serverKeys.isEmpty {
                printError("note: serverKeys is configured, so the relay uses those and not this database key")
            }
            return 0
        case "backup":
            let parsed = try Options.parse(options, values: [], switches: [], positional: 1)
            let copy = parsed.positional[0]
            guard !SQLStore.isPostgres(config.db) else {
                printError(
                    "pushrelay: backup copies a SQLite database; back PostgreSQL up with its own tools (pg_dump)")
                return 1
            }
            try SQLStore.backup(path: config.db, to: copy)
            // The copy gets new epochs: clients resync after a restore instead of resuming wrongly.
            try SQLStore.renewEpochs(path: copy)
            print("backed up \(config.db) to \(copy)")
            return 0
        case "ws-echo":
            try Options.parse(options, values: [], switches: [])
            return try echo(config, logger)
        default:
            throw UsageError(description: "unknown command '\(command)'")
        }
    }

    static let commands: Set<String> = [
        "serve", "migrate", "check-config", "token", "server-key", "generate-server-key", "backup", "ws-echo",
    ]

    /// Opens (creating and migrating) the configured database, with a message that names it.
    private static func openStore(_ config: RelayConfig) throws -> SQLStore {
        do {
            return try SQLStore(database: config.db)
        } catch {
            throw StartupError(description: "cannot open the database \(config.dbForDisplay): \(error)")
        }
    }

    private static func serve(_ config: RelayConfig, _ logger: Logger) throws -> Int32 {
        var signals = blockStopSignals()
        // Keep freed heap memory instead of handing it back (and forth) to the kernel on every
        // request: glibc's trimming showed up as madvise + TLB shootdowns under load. RelayApp
        // trims once every few seconds instead.
        pr_malloc_keep_memory(256 << 20, 32 << 20)

        let app: RelayApp
        do {
            app = try RelayApp(config: config, logger: logger)
        } catch let error as StoreError {
            throw StartupError(description: "cannot open the database \(config.dbForDisplay): \(error)")
        }
        let url: String
        do {
            url = try app.start()
        } catch {
            throw StartupError(description: "cannot listen on \(config.listen): \(error)")
        }
        print("pushrelay listening on \(url)")
        fflush(nil)
        var received: Int32 = 0
        sigwait(&signals, &received)
        logger.info("signal received", ("signal", received == SIGTERM ? "SIGTERM" : "SIGINT"))
        app.shutdown()
        // Everything accepted is stored and the store is closed: leave without `exit`'s atexit
        // handlers (OpenSSL's and libpq's cleanup), which would free global state under a thread
        // that has not wound down yet (a timer's, a resolver's).
        fflush(nil)
        _exit(0)
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

    private static func token(_ config: RelayConfig, _ options: Options) throws -> Int32 {
        guard let user = options.values["--user"] else { throw UsageError(description: "token needs --user USER") }
        guard Identifier.isValidUserOrDeviceId(user) else {
            throw UsageError(description: "'\(user)' is not a valid user id")
        }
        let device = options.values["--device"]
        if let device, !Identifier.isValidUserOrDeviceId(device) {
            throw UsageError(description: "'\(device)' is not a valid device id")
        }
        var ttl = ClientClaims.defaultLifetime
        if let text = options.values["--ttl"] {
            let lifetimes = ClientClaims.mintedLifetimes
            guard let value = Int64(text), lifetimes.contains(value) else {
                throw UsageError(
                    description:
                        "--ttl must be a number of seconds from \(lifetimes.lowerBound) to \(lifetimes.upperBound), not '\(text)'"
                )
            }
            ttl = value
        }
        let store = try openStore(config)
        defer { store.close() }
        let secret = try Secrets.resolve(config: config, store: store).clientTokenSecret
        let codec = ClientTokenCodec(hmac: { Crypto.hmacSHA256(key: Array(secret.utf8), message: $0) })
        let now = Timestamp.now.seconds
        print(codec.encode(ClientClaims(userId: user, deviceId: device, expiresAt: now + ttl, issuedAt: now)))
        return 0
    }

    /// The secrets in force, for the chat server's setup (nothing is generated or written).
    static func describeSecrets(_ config: RelayConfig) throws -> String {
        let secrets = try Secrets.inForce(config: config)
        let missing = "(not generated yet: start the relay once)"
        return """
            serverKeys=\(secrets.serverKeys.isEmpty ? missing : secrets.serverKeys.joined(separator: ","))
            clientTokenSecret=\(secrets.clientTokenSecret ?? missing)
            webhookSecret=\(secrets.webhookSecret ?? missing)
            """
    }

    /// The effective configuration as JSON, with secrets replaced by a note.
    static func describe(_ config: RelayConfig) -> String {
        let secrets: Set<String> = [
            "serverKeys", "clientTokenSecret", "webhookSecret", "metricsKey", "matrixNotifySecret",
        ]
        var writer = JSONWriter()
        writer.beginObject()
        for setting in ConfigLoader.settings {
            writer.key(setting.key)
            let value = setting.read(config)
            if secrets.contains(setting.key) {
                let isSet = value != .null && value != .array([])
                writer.string(
                    isSet
                        ? "<set>"
                        : (["metricsKey", "matrixNotifySecret"].contains(setting.key) ? "<none>" : "<generated>"))
            } else if setting.key == "db" {
                writer.string(config.dbForDisplay)  // a PostgreSQL URI may carry a password
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

/// A failure that stops the relay from starting: printed as one line, exit 1.
struct StartupError: Error, CustomStringConvertible {
    var description: String
}

extension RelayConfig {
    /// The same configuration, ignoring configured server keys (to reach the database's).
    static func withoutServerKeys(_ config: RelayConfig) -> RelayConfig {
        var copy = config
        copy.serverKeys = []
        return copy
    }
}
