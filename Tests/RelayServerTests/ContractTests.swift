import Foundation
import RelayCore
import RelayREST
import RelayServer
import RelaySettings
import RelayTesting
import Testing

@Suite struct ContractTests {
    /// `openapi.yaml` and the router must list the same (method, path) pairs.
    @Test func openAPIListsExactlyTheRoutes() throws {
        let specURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("openapi.yaml")
        let spec = try String(contentsOf: specURL, encoding: .utf8)
        var documented = Set<String>()
        var inPaths = false
        var currentPath: String?
        let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options"]
        for line in spec.split(separator: "\n", omittingEmptySubsequences: false) {
            if !line.hasPrefix(" "), !line.isEmpty {
                inPaths = line.hasPrefix("paths:")
                continue
            }
            guard inPaths else { continue }
            if line.hasPrefix("  /"), line.hasSuffix(":") {
                currentPath = String(line.dropFirst(2).dropLast())
            } else if line.hasPrefix("    "), !line.hasPrefix("     "), let currentPath {
                let key = line.dropFirst(4).split(separator: ":").first.map(String.init) ?? ""
                if methods.contains(key) { documented.insert("\(key.uppercased()) \(currentPath)") }
            }
        }
        let routed = Set(RelayAPI.routes.map { "\($0.method) \($0.path)" })
        #expect(
            documented == routed,
            "only in openapi.yaml: \(documented.subtracting(routed)); only in the router: \(routed.subtracting(documented))"
        )
        #expect(routed.count >= 14)
    }
}

@Suite struct ConfigLoaderTests {
    @Test func flagsWinOverEnvironmentWhichWinsOverTheFile() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("config-\(UUID().uuidString).json")
        try Data(
            #"{"listen":"127.0.0.1:1000","pushDelayMs":100,"retentionS":50,"pushAllowedHosts":["a.example","10.0.0.0/8"]}"#
                .utf8
        )
        .write(to: file)
        let (config, rest) = try ConfigLoader.load(
            arguments: ["--config", file.path, "--push-delay-ms=300", "extra"],
            environment: ["PUSHRELAY_PUSH_DELAY_MS": "200", "PUSHRELAY_RETENTION_S": "60"])
        #expect(config.listen == "127.0.0.1:1000")  // file
        #expect(config.retentionS == 60)  // environment over file
        #expect(config.pushDelayMs == 300)  // flag over environment
        #expect(config.pushAllowedHosts.spelled == ["a.example", "10.0.0.0/8"])
        #expect(rest == ["extra"])
    }

    @Test func rejectsBadValues() {
        #expect(throws: ConfigLoader.Error.self) {
            try ConfigLoader.load(arguments: ["--push-delay-ms", "soon"], environment: [:])
        }
        #expect(throws: ConfigLoader.Error.self) {
            try ConfigLoader.load(arguments: [], environment: ["PUSHRELAY_LISTEN": "nope"])
        }
        #expect(throws: ConfigLoader.Error.self) {
            try ConfigLoader.load(arguments: ["--push-allowed-hosts", "10.0.0.0/99"], environment: [:])
        }
        #expect(throws: ConfigLoader.Error.self) {
            try ConfigLoader.load(arguments: ["--webhook-secret", "plain"], environment: [:])
        }
        #expect(throws: ConfigLoader.Error.self) {
            try ConfigLoader.load(arguments: ["--log-level", "loud"], environment: [:])
        }
    }

    @Test func everySettingHasAnEnvironmentNameAndAFlag() {
        let names = ConfigLoader.settings.map(\.environmentName)
        #expect(names.contains("PUSHRELAY_PUSH_ALLOWED_HOSTS"))
        #expect(names.contains("PUSHRELAY_RETENTION_S"))
        #expect(names.contains("PUSHRELAY_MAX_WS_MESSAGE_BYTES"))
        #expect(ConfigLoader.settings.map(\.flag).contains("--max-ws-message-bytes"))
    }

    /// Every metric family the relay exposes has a row in `docs/OPERATIONS.md`'s metrics table.
    @Test func everyMetricIsDocumented() async throws {
        let relay = try RelayProcess()
        let text = try await relay.request("GET", "/metrics", token: nil).text
        let families = text.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("# TYPE ") else { return nil }
            return line.split(separator: " ").dropFirst(2).first.map(String.init)
        }
        #expect(families.count >= 10)
        let operations = try String(
            contentsOf: Self.repositoryRoot.appendingPathComponent("docs/OPERATIONS.md"), encoding: .utf8)
        for family in families {
            #expect(operations.contains("| `\(family)` |"), "docs/OPERATIONS.md lacks \(family)")
        }
    }

    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// `openapi.yaml`'s `info.version` is the version the binary reports (`pushrelay --version`).
    @Test func theContractCarriesTheBinarysVersion() throws {
        let spec = try String(contentsOf: Self.repositoryRoot.appendingPathComponent("openapi.yaml"), encoding: .utf8)
        let info = spec.split(separator: "\n").drop { $0 != "info:" }.dropFirst().prefix { $0.hasPrefix(" ") }
        let versions = info.filter { $0.hasPrefix("  version:") }
            .map { $0.dropFirst("  version:".count).trimmingCharacters(in: .whitespaces) }
        #expect(versions == [RelayConfig.version], "openapi.yaml info.version \(versions)")
    }

    /// `deploy/config.example.json` lists every setting, and docs/CONFIGURATION.md's tables give each
    /// one's key, variable and flag in a row of its own.
    @Test func theExampleConfigAndTheConfigurationDocListEverySetting() throws {
        let root = Self.repositoryRoot
        let example = try Data(contentsOf: root.appendingPathComponent("deploy/config.example.json"))
        let listed = Set((try JSONSerialization.jsonObject(with: example) as? [String: Any] ?? [:]).keys)
        let document = try String(
            contentsOf: root.appendingPathComponent("docs/CONFIGURATION.md"), encoding: .utf8)
        for setting in ConfigLoader.settings {
            #expect(listed.contains(setting.key), "config.example.json lacks \(setting.key)")
            let row = "| `\(setting.key)` | `\(setting.environmentName)` | `\(setting.flag)` |"
            #expect(document.contains(row), "docs/CONFIGURATION.md has no row \(row)")
        }
        let documented = document.split(separator: "\n").filter { $0.contains("` | `PUSHRELAY_") }
            .compactMap { $0.split(separator: "`").dropFirst().first.map(String.init) }
        #expect(Set(documented).subtracting(ConfigLoader.settings.map(\.key)).isEmpty)
        #expect(listed.subtracting(ConfigLoader.settings.map(\.key)).isEmpty)
    }
}
