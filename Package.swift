// swift-tools-version:6.0
import Foundation
import PackageDescription

/// Settings shared by every Swift target: Swift 6 mode comes from the tools version; these
/// upcoming features keep imports explicit and existentials spelled out.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "PushRelay",
    // The client SDK targets iOS 15 / macOS 12; the server targets are built on Linux only
    // (system libraries from Debian packages).
    platforms: [.macOS(.v12), .iOS(.v15)],
    products: [
        .executable(name: "pushrelay", targets: ["pushrelay"]),
        /// The client SDK for apps: `.product(name: "RelayClient", package: "pushrelay")`. It
        /// builds from `RelayClient`, `WebSocketCodec`, `RelayPrimitives` and `RelayLocks` alone
        /// (no C library, no Debian package).
        .library(name: "RelayClient", targets: ["RelayClient"]),
    ],
    targets: [
        // MARK: System libraries (C)
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        /// libpq: the PostgreSQL store (several nodes on one database).
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        /// OpenSSL's libssl: TLS for https push receivers.
        .systemLibrary(
            name: "CTLS",
            pkgConfig: "libssl",
            providers: [.apt(["libssl-dev"])]
        ),
        /// libnghttp2: HTTP/2 framing for the APNs provider API (HTTP/2 only).
        .systemLibrary(
            name: "CNGHTTP2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]
        ),

        /// glibc and Linux headers the Glibc module leaves out (malloc tuning, epoll, eventfd).
        .systemLibrary(name: "CLinux"),
        /// epoll + eventfd, owned by one type: what the event loops are built on.
        .target(name: "RelayPoll", dependencies: ["CLinux"], swiftSettings: swiftSettings),

        /// A pthread-based lock the thread sanitizer understands (see LockedValue.swift).
        .target(name: "RelayLocks", swiftSettings: swiftSettings),

        // MARK: Pure logic
        /// Base64 and incremental UTF-8 validation: the byte codecs everything stands on (the
        /// client SDK too); no dependencies.
        .target(name: "RelayPrimitives", swiftSettings: swiftSettings),
        .target(name: "RelayCore", dependencies: ["RelayPrimitives"], swiftSettings: swiftSettings),
        /// The append-only message log: records framed and checksummed, appended and synced,
        /// read back after a crash with a torn tail cut.
        .target(name: "RelayLog", dependencies: ["RelayPrimitives"], swiftSettings: swiftSettings),
        /// RFC 6455 handshake and frames, both roles; no I/O (the client SDK uses it too).
        .target(name: "WebSocketCodec", dependencies: ["RelayPrimitives"], swiftSettings: swiftSettings),

        // MARK: I/O layers
        /// libcrypto behind Swift types: HMAC, the push providers' keys and signatures, Web Push encryption.
        .target(name: "RelayCrypto", dependencies: ["CCrypto", "RelayPrimitives"], swiftSettings: swiftSettings),
        /// A SQLite VFS that hands a commit's write-ahead-log writes to the kernel in one call.
        .target(name: "CWALBuffer", dependencies: ["CSQLite"]),
        .target(
            name: "RelayStore", dependencies: ["RelayCore", "RelayCrypto", "CSQLite", "CWALBuffer", "CPostgres", "RelayLocks", "RelayLog"],
            swiftSettings: swiftSettings),
        .target(name: "RelayHTTP", dependencies: ["CMicroHTTPD", "RelayCore", "RelayLocks"], swiftSettings: swiftSettings),
        /// Logging (logfmt) and metrics (Prometheus text), shared by the layers above.
        .target(name: "RelayTelemetry", dependencies: ["RelayCore", "RelayLocks"], swiftSettings: swiftSettings),
        /// The ways out of the relay, with no store: the push providers (webhook, APNs, FCM, Web
        /// Push), the HTTP/1.1 and HTTP/2 clients, TLS, sockets, the SSRF guard.
        .target(
            name: "RelayTransport",
            dependencies: ["RelayCore", "RelayCrypto", "RelayLocks", "RelayPoll", "CTLS", "CNGHTTP2", "RelayPrimitives"],
            swiftSettings: swiftSettings),
        /// The scheduler on the store: the notifier (due batches, breakers, outcomes) and the event
        /// outbox, over the transports.
        .target(
            name: "RelayDelivery",
            dependencies: ["RelayCore", "RelayLocks", "RelayPoll", "RelayStore", "RelayTelemetry", "RelayTransport"],
            swiftSettings: swiftSettings),
        /// The epoll loop that owns upgraded sockets: write queues, pings, dead-peer detection.
        .target(
            name: "RelayWebSocket",
            dependencies: ["WebSocketCodec", "RelayCore", "RelayHTTP", "RelayLocks", "RelayPoll"],
            swiftSettings: swiftSettings),

        /// The operator console's page, script and style, compiled in (no build step, no files beside the binary).
        .target(name: "RelayConsole", swiftSettings: swiftSettings),

        // MARK: The server, by job (each imports only the ones above it)
        /// The settings: parsed once (file, environment, flags) into `RelayConfig`, and checked.
        .target(
            name: "RelaySettings", dependencies: ["RelayCore", "RelayHTTP", "RelayTelemetry", "RelayPrimitives"],
            swiftSettings: swiftSettings),
        /// The live side: WebSocket sessions, fan-out, presence, cluster leases, signals.
        .target(
            name: "RelayLive",
            dependencies: [
                "RelayCore", "RelayStore", "RelayHTTP", "RelayTelemetry", "RelayWebSocket", "WebSocketCodec", "RelayLocks",
            ],
            swiftSettings: swiftSettings),
        /// The REST API: routes, authentication, rate limits, validation, the calls into the store.
        .target(
            name: "RelayREST",
            dependencies: [
                "RelaySettings", "RelayLive", "RelayCore", "RelayCrypto", "RelayStore", "RelayHTTP", "RelayTelemetry",
                "RelayWebSocket", "WebSocketCodec", "RelayPrimitives", "RelayConsole", "RelayLocks",
            ],
            swiftSettings: swiftSettings),
        /// Wiring and lifecycle: the app, its services' order, secrets, the CLI's commands.
        .target(
            name: "RelayServer",
            dependencies: [
                "RelaySettings", "RelayLive", "RelayREST", "RelayCore", "RelayCrypto", "RelayStore", "RelayHTTP",
                "RelayDelivery", "RelayTransport", "RelayTelemetry", "RelayWebSocket", "WebSocketCodec", "RelayPrimitives",
                "CLinux",
                "RelayLocks",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(name: "pushrelay", dependencies: ["RelayServer"], swiftSettings: swiftSettings),

        /// The WebSocket load tool of the benchmarks (BENCHMARKS.md).
        .executableTarget(
            name: "pushrelay-load", dependencies: ["WebSocketCodec", "CLinux"], path: "Benchmarks/LoadTool",
            swiftSettings: swiftSettings),

        // MARK: Client SDK
        /// The Swift client SDK for apps: Foundation and the codec only.
        .target(name: "RelayClient", dependencies: ["WebSocketCodec", "RelayLocks"], swiftSettings: swiftSettings),
        /// `pushrelay-tail`: prints a user's messages as they arrive (the SDK's example).
        .executableTarget(name: "pushrelay-tail", dependencies: ["RelayClient"], swiftSettings: swiftSettings),

        // MARK: Test support
        /// Test fixtures shared by the test targets: a real relay process on port 0, HTTP helpers.
        .target(name: "RelayTesting", dependencies: ["WebSocketCodec", "RelayLocks"], swiftSettings: swiftSettings),

        // MARK: Tests
        .testTarget(
            name: "RelayUnitTests",
            dependencies: [
                "RelayCore", "RelayCrypto", "RelayStore", "RelayDelivery", "RelayTransport", "RelayLocks", "RelayTelemetry",
                "RelayTesting", "WebSocketCodec", "RelayPrimitives", "RelayLive", "RelayLog",
                // An in-memory nghttp2 server session answers HTTP2Session's requests.
                "CNGHTTP2",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "RelayServerTests",
            dependencies: [
                "RelayServer", "RelaySettings", "RelayLive", "RelayREST", "RelayCore", "RelayLocks", "RelayStore",
                "RelayTelemetry", "RelayTesting", "RelayClient", "RelayPrimitives",
            ],
            swiftSettings: swiftSettings
        ),
    ]
)

// Fuzz targets have no `main` (libFuzzer provides it), so they only exist in the fuzzing build:
// `make fuzz` sets PUSHRELAY_FUZZ=1 and builds with `--sanitize=fuzzer`.
if ProcessInfo.processInfo.environment["PUSHRELAY_FUZZ"] != nil {
    package.targets += [
        .executableTarget(name: "FuzzWebSocket", dependencies: ["WebSocketCodec"], swiftSettings: swiftSettings),
        .executableTarget(name: "FuzzJSON", dependencies: ["RelayCore"], swiftSettings: swiftSettings),
        .executableTarget(name: "FuzzToken", dependencies: ["RelayCore", "RelayPrimitives"], swiftSettings: swiftSettings),
    ]
}
