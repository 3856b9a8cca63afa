import Foundation
import RelayTesting
import Testing

/// The operator's first hour: start-up failures, the strict command line, keys and secrets,
/// the access log, backups of a running relay.
@Suite struct OperatorTests {
    func scratch() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "pushrelay-op-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    // MARK: Start-up failures: one line, exit 1, never a trap

    @Test func aBusyPortIsOneLineAndExit1() async throws {
        let running = try RelayProcess()
        let directory = try scratch()
        let second = try RelayCommand.run(
            ["serve", "--listen", "127.0.0.1:\(running.port)", "--db", directory.path + "/b.sqlite"])
        #expect(second.status == 1)
        #expect(second.stderr.contains("cannot listen on 127.0.0.1:\(running.port)"))
        #expect(second.stderr.contains("Address already in use"))
        #expect(!second.stderr.contains("crashed"))
        #expect(second.stderr.split(separator: "\n").filter { !$0.hasPrefix("ts=") }.count == 1, "\(second.stderr)")
    }

    @Test(arguments: [
        (["--listen", "192.0.2.1:8080"], "cannot listen on 192.0.2.1:8080"),  // an address this machine lacks
        (["--db", "/proc/no-such-dir/relay.sqlite"], "cannot open the database"),
        (["--push-ca-file", "/nonexistent/ca.pem"], "cannot load the trust store /nonexistent/ca.pem"),  // a TLS file
    ])
    func startUpFailuresExit1(_ arguments: [String], _ message: String) throws {
        let directory = try scratch()
        var all = ["serve", "--listen", "127.0.0.1:0", "--db", directory.path + "/r.sqlite"]
        all += arguments
        let run = try RelayCommand.run(all)
        #expect(run.status == 1)
        #expect(run.stderr.contains(message), "\(run.stderr)")
        #expect(!run.stderr.contains("crashed"))
    }

    // MARK: A strict command line

    @Test(arguments: [
        ["serve", "--push-allowed-host", "x"],  // misspelled setting
        ["--listen", "127.0.0.1:0", "check-config"],  // a flag before the command
        ["serv"],  // unknown command
        ["token", "--user", "a", "--ttl", "abc"],  // malformed value
        ["token", "--user", "a", "--ttl", "2592001"],  // longer than POST /v1/tokens allows (30 days)
        ["token", "--user", "a", "--ttl", "59"],
        ["serve", "--push-delay-ms", "soon"],
        ["check-config", "extra"],
        ["backup"],
        [],
    ])
    func usageErrorsExit2AndTouchNothing(_ arguments: [String]) throws {
        let directory = try scratch()
        let run = try RelayCommand.run(
            arguments, environment: ["PUSHRELAY_DB": directory.path + "/r.sqlite"], directory: directory)
        #expect(run.status == 2, "\(arguments): \(run.stderr)")
        #expect(run.stderr.contains("pushrelay"))
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/r.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: directory.path + "/pushrelay.sqlite"))
    }

    /// A bearer key (server key, metrics key) or Matrix notify secret shorter than 16 bytes is
    /// a configuration error that names the setting, from the environment or a flag alike.
    @Test(arguments: [
        (["check-config"], ["PUSHRELAY_SERVER_KEYS": "a"], "serverKeys must be at least 16 bytes"),
        (["check-config", "--server-keys", "long-enough-key-0123,short"], [:], "serverKeys must be at least 16 bytes"),
        (["check-config", "--metrics-key", "m"], [:], "metricsKey must be at least 16 bytes"),
        (["serve"], ["PUSHRELAY_METRICS_KEY": "fifteen-bytes-k"], "metricsKey must be at least 16 bytes"),
        (["check-config", "--matrix-notify-secret", "short"], [:], "matrixNotifySecret must be at least 16"),
    ])
    func shortKeysAreConfigurationErrors(
        _ arguments: [String], _ environment: [String: String], _ message: String
    )
        throws
    {
        let directory = try scratch()
        let run = try RelayCommand.run(
            arguments, environment: environment.merging(["PUSHRELAY_DB": directory.path + "/r.sqlite"]) { $1 },
            directory: directory)
        #expect(run.status == 2, "\(run.stderr)")
        #expect(run.stderr.contains(message), "\(run.stderr)")
        let fine = try RelayCommand.run(
            ["check-config", "--server-keys", "sixteen-bytes-k1", "--metrics-key", "sixteen-bytes-k2"],
            environment: ["PUSHRELAY_DB": directory.path + "/r.sqlite"], directory: directory)
        #expect(fine.status == 0, "\(fine.stderr)")
    }

    /// Push credentials that could never work are refused at start, saying what is wrong.
    @Test(arguments: [
        (["--apns-key-id", "KEY12345"], "apnsKeyId must be the 10 letters and digits"),
        (["--apns-key-id", "KEY1234567", "--apns-team-id", "team-12345"], "apnsTeamId must be the 10 letters"),
        (["--vapid-subject", "mailto:"], "vapidSubject must be a mailto: address or an https: URL"),
        (["--vapid-subject", "ops@example.com"], "vapidSubject must be a mailto: address or an https: URL"),
        (["--fcm-service-account-file", "duplicate.json"], "not valid JSON: duplicate member name"),
        // Another app's credential files are loaded too, its name in the message.
        (["--apps", #"{"acme": {"fcmServiceAccountFile": "duplicate.json"}}"#], "apps.acme: fcmServiceAccountFile"),
        (
            ["--apps", #"{"acme": {"vapidKeyFile": "missing.pem", "vapidSubject": "mailto:a@b.c"}}"#],
            "apps.acme: vapidKeyFile: cannot read missing.pem"
        ),
    ])
    func pushCredentialMistakesAreConfigurationErrors(_ flags: [String], _ message: String) throws {
        let directory = try scratch()
        let key = directory.appendingPathComponent("apns.p8").path
        try PushCredentials.openssl(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key])
        try Data(#"{"type":"service_account","project_id":"a","project_id":"b"}"#.utf8)
            .write(to: directory.appendingPathComponent("duplicate.json"))
        var arguments = ["check-config", "--server-keys", "sixteen-bytes-k1"]
        if flags.contains("--apns-key-id") {
            arguments += ["--apns-key-file", key, "--apns-team-id", "TEAM123456"]
        }
        if flags.contains("--vapid-subject") { arguments += ["--vapid-key-file", key] }
        let run = try RelayCommand.run(
            arguments + flags, environment: ["PUSHRELAY_DB": directory.path + "/r.sqlite"], directory: directory)
        #expect(run.status == 2, "\(flags): \(run.stderr)")
        #expect(run.stderr.contains(message), "\(flags): \(run.stderr)")
    }

    @Test func versionAndHelpPrintAndExit() throws {
        let version = try RelayCommand.run(["--version"])
        #expect(version.status == 0)
        #expect(version.stdout.hasPrefix("pushrelay "))
        let help = try RelayCommand.run(["serve", "--help"])
        #expect(help.status == 0)
        #expect(help.stdout.contains("usage: pushrelay"))
    }

    // MARK: Keys and secrets

    @Test func serverKeyPrintsTheKeyInForceAndNeverWrites() async throws {
        let directory = try scratch()
        let db = directory.path + "/r.sqlite"
        // Configured in the environment: that one, and no database is created.
        let configured = try RelayCommand.run(
            ["server-key"], environment: ["PUSHRELAY_SERVER_KEYS": "from-env-server-key", "PUSHRELAY_DB": db])
        #expect(configured.status == 0)
        #expect(configured.stdout == "from-env-server-key\n")
        #expect(!FileManager.default.fileExists(atPath: db))
        // None configured and none generated: an error that says what to do.
        let none = try RelayCommand.run(["server-key", "--db", db])
        #expect(none.status == 1)
        #expect(none.stderr.contains("generate-server-key"))
        #expect(!FileManager.default.fileExists(atPath: db))
        // Generated explicitly: then printed, and it works against a relay on that database.
        let generated = try RelayCommand.run(["generate-server-key", "--db", db])
        #expect(generated.status == 0)
        let key = generated.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(key.hasPrefix("prk_"))
        #expect(try RelayCommand.run(["server-key", "--db", db]).stdout == key + "\n")
        let secrets = try RelayCommand.run(["check-config", "--show-secrets", "--db", db])
        #expect(secrets.stdout.contains("serverKeys=\(key)"))
        #expect(secrets.stdout.contains("webhookSecret=whsec_"))
        #expect(secrets.stdout.contains("clientTokenSecret="))
    }

    // MARK: Access log

    @Test func everyRequestLeavesAnAccessLineWithoutSecrets() async throws {
        let relay = try RelayProcess(arguments: ["--log-level", "info"])
        _ = try await relay.request("GET", "/v1/users/a/messages?access_token=query-secret-canary", token: nil)
        _ = try await relay.request("GET", "/v1/nothing-here")
        _ = try await relay.request("POST", "/v1/messages", json: ["id": "m", "recipients": ["a"], "payload": [:]])
        _ = try await relay.request("POST", "/v1/messages", json: ["id": "m", "recipients": ["b"], "payload": [:]])
        let token = try await relay.token(userId: "a", deviceId: "phone")
        let socket = try WebSocketTestClient(port: relay.port, path: "/v1/ws?access_token=\(token)")
        _ = try socket.nextJSON()
        socket.close()
        _ = try socket.waitForClose()
        // Access lines are written after the answer, the close line once the relay has seen it.
        _ = await eventually {
            ["status=409", "status=202", "msg=\"websocket closed\""].allSatisfy(relay.logText.contains)
        }
        let log = relay.logText
        for status in ["401", "404", "202", "409"] {
            #expect(log.contains("msg=request") && log.contains("status=\(status)"), "no \(status) line")
        }
        #expect(log.contains("method=GET path=/v1/users/a/messages status=401"))
        #expect(log.contains("client=127.0.0.1"))
        #expect(log.contains("msg=\"websocket opened\" user.id=a device.id=phone"))
        #expect(log.contains("msg=\"websocket closed\" user.id=a device.id=phone") && log.contains("code=1000"))
        #expect(!log.contains("query-secret-canary"))
        #expect(!log.contains(token))
        #expect(!log.contains(RelayProcess.serverKey))
    }

    /// What a client sends never breaks a log line: NEL (U+0085), LINE and PARAGRAPH SEPARATOR
    /// (U+2028, U+2029), DEL and the other C1 controls are escaped like `\n`.
    @Test func lineBreakingCharactersAreEscapedInTheLog() async throws {
        let relay = try RelayProcess(arguments: ["--log-level", "info"])
        _ = try await relay.request("GET", "/v1/%E2%80%A8a%C2%85b%E2%80%A9c%7Fd%C2%9Be")
        _ = await eventually { relay.logText.contains("msg=request") }  // the access line, written after the answer
        let log = relay.logText
        #expect(log.contains(#"path="/v1/\u2028a\u0085b\u2029c\u007Fd\u009Be""#), "\(log)")
        let raw: [Unicode.Scalar] = ["\u{85}", "\u{2028}", "\u{2029}", "\u{7F}", "\u{9B}"]
        #expect(!log.unicodeScalars.contains(where: raw.contains))
    }

    // MARK: Backup

    @Test(.disabled(if: RelayProcess.postgresDirectory != nil, "backup copies a SQLite database"))
    func aBackupOfARunningRelayServesTheSameMessages() async throws {
        let relay = try RelayProcess()
        for n in 0..<50 {
            _ = try await relay.request(
                "POST", "/v1/messages", json: ["id": "b\(n)", "recipients": ["bea"], "payload": ["n": n]])
        }
        let copy = try scratch().path + "/copy.sqlite"
        // Posted just now: some are in the relay's message log only, and the copy runs them.
        let backup = try RelayCommand.run(["backup", copy, "--db", relay.databasePath])
        #expect(backup.status == 0, "\(backup.stderr)")
        #expect(!FileManager.default.fileExists(atPath: copy + "-log"))
        let attributes = try FileManager.default.attributesOfItem(atPath: copy)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(try RelayCommand.run(["backup", copy, "--db", relay.databasePath]).status == 1)  // never overwrites
        let epoch = try #require(try await relay.request("GET", "/v1/users/bea/messages").object["epoch"] as? String)
        let restored = try RelayProcess(arguments: ["--db", copy])
        let page = try await restored.request("GET", "/v1/users/bea/messages?limit=100").object
        #expect((page["messages"] as? [Any])?.count == 50)
        #expect(page["headSeq"] as? Int == 50)
        // The copy has new epochs: a client resuming with its old cursor is told to resync.
        #expect(page["epoch"] as? String != epoch)
        let resumed = try await restored.request("GET", "/v1/users/bea/messages?after=50&epoch=\(epoch)").object
        #expect(resumed["complete"] as? Bool == false)
    }

    // MARK: The console's reads

    /// `GET /v1/stats` reads the push job counts at most once per `statsCacheMs`: within the
    /// window a job queued after a read does not show; with 0 it shows at once. (The window's
    /// arithmetic is `CachedValueTests`', on an injected clock; here a one-minute window keeps
    /// the test independent of how fast this machine answers.)
    @Test func statsCountsComeFromACacheWithinItsWindow() async throws {
        for (window, expectedGrowth) in [("60000", 0), ("0", 1)] {
            let relay = try RelayProcess(arguments: ["--push-delay-ms", "600000", "--stats-cache-ms", window])
            let device = try await relay.request(
                "PUT", "/v1/users/alice/devices/phone", json: ["pushUrl": "http://127.0.0.1:9/push"])
            #expect(device.status == 201)
            func pending() async throws -> Int? {
                let stats = try await relay.request("GET", "/v1/stats")
                return (stats.object["pushJobs"] as? [String: Any])?["pending"] as? Int
            }
            let before = try #require(try await pending())
            let post = try await relay.request(
                "POST", "/v1/messages", json: ["id": "m1", "recipients": ["alice"], "payload": [:]])
            #expect(post.status == 202)
            #expect(try await pending() == before + expectedGrowth, "window \(window) ms")
        }
    }

    /// A symbolic link, dangling or not, where the database, its `-wal` or `-shm`, or a backup
    /// would go is refused with one line and exit 1: SQLite would follow it and create the target
    /// with the umask's mode (`-rw-r--r--`), every secret inside.
    @Test(.disabled(if: RelayProcess.postgresDirectory != nil, "SQLite files"))
    func symbolicLinksAreRefusedForTheDatabaseAndBackups() throws {
        let directory = try scratch()
        let files = FileManager.default
        let elsewhere = directory.path + "/elsewhere"
        try files.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        func serve(_ database: String) throws -> RelayCommand {
            try RelayCommand.run(["serve", "--listen", "127.0.0.1:0", "--db", database])
        }

        let link = directory.path + "/link.sqlite"
        try files.createSymbolicLink(atPath: link, withDestinationPath: elsewhere + "/x.sqlite")
        let dangling = try serve(link)
        #expect(dangling.status == 1)
        #expect(dangling.stderr.contains("\(link) is a symbolic link"), "\(dangling.stderr)")
        #expect(try files.contentsOfDirectory(atPath: elsewhere).isEmpty)

        let real = directory.path + "/real.sqlite"
        #expect(try RelayCommand.run(["migrate", "--db", real]).status == 0)
        for suffix in ["-wal", "-shm"] {
            try? files.removeItem(atPath: real + suffix)
            try files.createSymbolicLink(atPath: real + suffix, withDestinationPath: elsewhere + "/x" + suffix)
            let run = try serve(real)
            #expect(run.status == 1)
            #expect(run.stderr.contains("\(real)\(suffix) is a symbolic link"), "\(run.stderr)")
            #expect(try files.contentsOfDirectory(atPath: elsewhere).isEmpty)
            try files.removeItem(atPath: real + suffix)
        }

        let copy = directory.path + "/copy.sqlite"
        try files.createSymbolicLink(atPath: copy, withDestinationPath: elsewhere + "/copy.sqlite")
        let backup = try RelayCommand.run(["backup", copy, "--db", real])
        #expect(backup.status == 1)
        #expect(backup.stderr.contains("\(copy) is a symbolic link"), "\(backup.stderr)")
        #expect(try files.contentsOfDirectory(atPath: elsewhere).isEmpty)
    }
}
