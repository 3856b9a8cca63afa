import Foundation
package import RelayCore
import RelayHTTP
import RelayPrimitives
import RelayTelemetry

/// Builds a `RelayConfig` from file, environment and flags, in that order of precedence
/// (flags win). One table names each setting once for all three sources.
package enum ConfigLoader {
    package struct Error: Swift.Error, CustomStringConvertible {
        package var description: String
        package init(description: String) { self.description = description }
    }

    /// A setting: its JSON key, and how to apply a textual value to the config.
    package struct Setting: Sendable {
        package let key: String
        let apply: @Sendable (inout RelayConfig, String) throws(Error) -> Void
        /// The current value, for `check-config`.
        package let read: @Sendable (RelayConfig) -> JSONValue

        /// `PUSHRELAY_PUSH_DELAY_MS` for `pushDelayMs`.
        package var environmentName: String {
            var name = "PUSHRELAY_"
            for character in key {
                if character.isUppercase { name.append("_") }
                name.append(contentsOf: character.uppercased())
            }
            return name
        }

        /// `--push-delay-ms` for `pushDelayMs`.
        package var flag: String {
            var name = "--"
            for character in key {
                if character.isUppercase { name.append("-") }
                name.append(contentsOf: character.lowercased())
            }
            return name
        }
    }

    static func string(_ key: String, _ path: WritableKeyPath<RelayConfig, String>) -> Setting {
        nonisolated(unsafe) let path = path  // key paths to stored properties are immutable
        return Setting(
            key: key,
            apply: { config, value throws(Error) in
                guard !value.isEmpty else { throw Error(description: "\(key) must not be empty") }
                config[keyPath: path] = value
            }, read: { .string($0[keyPath: path]) })
    }

    static func optionalString(_ key: String, _ path: WritableKeyPath<RelayConfig, String?>) -> Setting {
        nonisolated(unsafe) let path = path
        return Setting(
            key: key, apply: { config, value throws(Error) in config[keyPath: path] = value.isEmpty ? nil : value },
            read: { $0[keyPath: path].map { .string($0) } ?? .null })
    }

    static func list(_ key: String, _ path: WritableKeyPath<RelayConfig, [String]>) -> Setting {
        nonisolated(unsafe) let path = path
        return Setting(
            key: key,
            apply: { config, value throws(Error) in
                config[keyPath: path] = value.split(separator: ",").map { $0.trimmingASCIISpaces() }
                    .filter { !$0.isEmpty }
            }, read: { .array($0[keyPath: path].map { .string($0) }) })
    }

    /// A host allow-list (`HostAllowList`'s syntax), comma-separated.
    static func allowList(_ key: String, _ path: WritableKeyPath<RelayConfig, HostAllowList>) -> Setting {
        nonisolated(unsafe) let path = path
        return Setting(
            key: key,
            apply: { config, value throws(Error) in
                let entries = value.split(separator: ",").map { $0.trimmingASCIISpaces() }.filter { !$0.isEmpty }
                switch HostAllowList.parse(entries) {
                case .success(let list): config[keyPath: path] = list
                case .failure(let error): throw Error(description: "\(key): \(error.message)")
                }
            }, read: { .array($0[keyPath: path].spelled.map { .string($0) }) })
    }

    /// A push service's base URL: https, no path (the relay adds the service's own).
    static func serviceURL(_ key: String, _ path: WritableKeyPath<RelayConfig, PushURL>) -> Setting {
        nonisolated(unsafe) let path = path
        return Setting(
            key: key,
            apply: { config, value throws(Error) in
                guard let url = try? PushURL(value), url.scheme == "https", url.target == "/" else {
                    throw Error(
                        description:
                            "\(key) must be an https URL with no path, such as https://host:443, not '\(value)'")
                }
                config[keyPath: path] = url
            }, read: { .string($0[keyPath: path].text) })
    }

    static func boolean(_ key: String, _ path: WritableKeyPath<RelayConfig, Bool>) -> Setting {
        nonisolated(unsafe) let path = path
        return Setting(
            key: key,
            apply: { config, value throws(Error) in
                switch value.trimmingASCIISpaces().lowercased() {
                case "true", "1", "yes", "on": config[keyPath: path] = true
                case "false", "0", "no", "off": config[keyPath: path] = false
                default: throw Error(description: "\(key) must be true or false, not '\(value)'")
                }
            }, read: { .bool($0[keyPath: path]) })
    }

    static func integer<T: FixedWidthInteger & Sendable>(
        _ key: String, _ path: WritableKeyPath<RelayConfig, T>, _ range: ClosedRange<T>
    ) -> Setting {
        nonisolated(unsafe) let path = path
        return Setting(
            key: key,
            apply: { config, value throws(Error) in
                guard let number = T(value.trimmingASCIISpaces()), range.contains(number) else {
                    throw Error(
                        description:
                            "\(key) must be an integer from \(range.lowerBound) to \(range.upperBound), not '\(value)'")
                }
                config[keyPath: path] = number
            }, read: { .number(String($0[keyPath: path])) })
    }

    package static let settings: [Setting] = [
        string("listen", \.listen),
        string("db", \.db),
        list("serverKeys", \.serverKeys),
        optionalString("clientTokenSecret", \.clientTokenSecret),
        optionalString("webhookSecret", \.webhookSecret),
        allowList("pushAllowedHosts", \.pushAllowedHosts),
        allowList("webPushAllowedHosts", \.webPushAllowedHosts),
        optionalString("pushCaFile", \.pushCaFile),
        Setting(
            key: "eventsUrl",
            apply: { config, value throws(Error) in
                guard !value.isEmpty else {
                    config.eventsUrl = nil
                    return
                }
                do {
                    config.eventsUrl = try PushURL(value)
                } catch {
                    throw Error(description: "eventsUrl must be an absolute http(s) URL, not '\(value)'")
                }
            }, read: { $0.eventsUrl.map { .string($0.text) } ?? .null }),
        integer("pushDelayMs", \.pushDelayMs, 0...86_400_000),
        integer("ackTimeoutMs", \.ackTimeoutMs, 100...86_400_000),
        integer("pingIntervalMs", \.pingIntervalMs, 100...3_600_000),
        integer("retentionS", \.retentionS, 1...31_536_000),
        integer("nodeLeaseMs", \.nodeLeaseMs, 1000...3_600_000),
        integer("pushTimeoutMs", \.pushTimeoutMs, 100...600_000),
        integer("pushRetryBaseMs", \.pushRetryBaseMs, 1...3_600_000),
        integer("pushRetryCapMs", \.pushRetryCapMs, 1...86_400_000),
        integer("maxPayloadBytes", \.maxPayloadBytes, 16...16_777_216),
        integer("maxWsMessageBytes", \.maxWsMessageBytes, 125...16_777_216),
        integer("maxBodyBytes", \.maxBodyBytes, 1024...67_108_864),
        integer("httpThreads", \.httpThreads, 1...256),
        integer("maxConnections", \.maxConnections, 1...1_000_000),
        integer("maxConnectionsPerIp", \.maxConnectionsPerIp, 0...1_000_000),
        integer("connectionTimeoutS", \.connectionTimeoutS, 0...86_400),
        integer("requestHeaderTimeoutMs", \.requestHeaderTimeoutMs, 100...3_600_000),
        integer("requestBodyTimeoutMs", \.requestBodyTimeoutMs, 100...3_600_000),
        integer("connectionMemoryBytes", \.connectionMemoryBytes, 4096...1_048_576),
        integer("shutdownDrainMs", \.shutdownDrainMs, 0...3_600_000),
        integer("statsCacheMs", \.statsCacheMs, 0...600_000),
        Setting(
            key: "logLevel",
            apply: { config, value throws(Error) in
                guard let level = LogLevel(rawValue: value) else {
                    throw Error(description: "logLevel must be debug, info, warning or error, not '\(value)'")
                }
                config.logLevel = level
            }, read: { .string($0.logLevel.rawValue) }),
        optionalString("metricsKey", \.metricsKey),
        optionalString("matrixNotifySecret", \.matrixNotifySecret),
        boolean("accessLog", \.accessLog),
        integer("pruneIntervalS", \.pruneIntervalS, 1...86_400),
        integer("rateLimitServerPerS", \.rateLimitServerPerS, 0...10_000_000),
        integer("rateLimitClientPerS", \.rateLimitClientPerS, 0...1_000_000),
        integer("wsMaxPerUser", \.wsMaxPerUser, 1...100_000),
        integer("wsFramesPerS", \.wsFramesPerS, 1...100_000),
        integer("maxDevicesPerUser", \.maxDevicesPerUser, 1...1_000_000),
        integer("signalsMaxInFlight", \.signalsMaxInFlight, 1...10_000),
        integer("wsDeadAfterMs", \.wsDeadAfterMs, 200...3_600_000),
        optionalString("apnsKeyFile", \.apnsKeyFile),
        optionalString("apnsKeyId", \.apnsKeyId),
        optionalString("apnsTeamId", \.apnsTeamId),
        optionalString("apnsTopic", \.apnsTopic),
        serviceURL("apnsUrl", \.apnsUrl),
        serviceURL("apnsSandboxUrl", \.apnsSandboxUrl),
        optionalString("fcmServiceAccountFile", \.fcmServiceAccountFile),
        serviceURL("fcmUrl", \.fcmUrl),
        optionalString("vapidKeyFile", \.vapidKeyFile),
        optionalString("vapidSubject", \.vapidSubject),
        integer("wsMaxQueuedBytes", \.wsMaxQueuedBytes, 4096...1_073_741_824),
        list("wsAllowedOrigins", \.wsAllowedOrigins),
        list("corsAllowedOrigins", \.corsAllowedOrigins),
        Setting(
            key: "apps", apply: { config, value throws(Error) in config.apps = try apps(value) },
            read: { config in .object(config.apps.sorted { $0.key < $1.key }.map { ($0.key.name, $0.value.json) }) }),
    ]

    /// `apps`: `{"<app id>": {"apnsKeyFile": …, "matrixAppIds": [...]}, …}` — in the file an
    /// object, in the environment or a flag the same JSON as text.
    static func apps(_ text: String) throws(Error) -> [AppID: AppSettings] {
        guard !text.isEmpty else { return [:] }
        guard let json = try? JSONParser.parse(Array(text.utf8)), case .object(let members) = json else {
            throw Error(description: "apps must be a JSON object keyed by app id")
        }
        var apps: [AppID: AppSettings] = [:]
        for (name, value) in members {
            guard let id = AppID(name) else {
                throw Error(description: "apps: '\(name)' is not an app id (1 to 64 of A-Z a-z 0-9 . _ -)")
            }
            guard id != .default else {
                throw Error(description: "apps: 'default' is the app of the top-level push settings; set those")
            }
            guard case .object(let fields) = value else { throw Error(description: "apps.\(name) must be an object") }
            var app = AppSettings()
            for (key, field) in fields {
                if key == "matrixAppIds" {
                    guard case .array(let items) = field else {
                        throw Error(description: "apps.\(name).matrixAppIds must be a list of strings")
                    }
                    app.matrixAppIds = try items.map { item throws(Error) in
                        guard let pattern = item.stringValue, isMatrixAppIdPattern(pattern) else {
                            throw Error(
                                description: "apps.\(name).matrixAppIds: each is an app_id or 'prefix.*', not \(item)")
                        }
                        return pattern
                    }
                } else if let path = AppSettings.members.first(where: { $0.0 == key })?.1 {
                    guard let string = field.stringValue, !string.isEmpty else {
                        throw Error(description: "apps.\(name).\(key) must be a non-empty string")
                    }
                    app[keyPath: path] = string
                } else {
                    throw Error(description: "apps.\(name): unknown setting '\(key)'")
                }
            }
            apps[id] = app
        }
        return apps
    }

    /// An `app_id` (Matrix: up to 64 characters, reverse-DNS), or one ending in `.*`; a `*`
    /// anywhere else would match what the operator did not mean.
    private static func isMatrixAppIdPattern(_ pattern: String) -> Bool {
        let stem = pattern.hasSuffix(".*") ? pattern.dropLast(2) : Substring(pattern)
        return !stem.isEmpty && stem.count <= 64 && !stem.contains("*")
            && stem.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7F }
    }

    /// Loads the configuration.
    /// - Parameters:
    ///   - arguments: command-line arguments after the subcommand; `--config FILE` names the file.
    ///   - environment: the process environment.
    /// - Returns: the config and the arguments that were not settings (for the subcommand).
    package static func load(
        arguments: [String], environment: [String: String]
    ) throws(Error) -> (config: RelayConfig, rest: [String]) {
        var config = RelayConfig()
        var flags: [(Setting, String)] = []
        var rest: [String] = []
        var configFile = environment["PUSHRELAY_CONFIG"]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let (name, inlineValue) = splitFlag(argument)
            if name == "--config" || settings.contains(where: { $0.flag == name }) {
                let value: String
                if let inlineValue {
                    value = inlineValue
                } else {
                    guard index + 1 < arguments.count else { throw Error(description: "\(name) needs a value") }
                    index += 1
                    value = arguments[index]
                }
                if name == "--config" {
                    configFile = value
                } else if let setting = settings.first(where: { $0.flag == name }) {
                    flags.append((setting, value))
                }
            } else {
                rest.append(argument)
            }
            index += 1
        }
        if let configFile { try applyFile(configFile, to: &config) }
        for setting in settings {
            if let value = environment[setting.environmentName] { try setting.apply(&config, value) }
        }
        for (setting, value) in flags { try setting.apply(&config, value) }
        try validate(config)
        return (config, rest)
    }

    private static func splitFlag(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    private static func applyFile(_ path: String, to config: inout RelayConfig) throws(Error) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw Error(description: "cannot read config file \(path)")
        }
        let json: JSONValue
        do {
            json = try JSONParser.parse(Array(data))
        } catch {
            throw Error(description: "config file \(path) is not valid JSON: \(error)")
        }
        guard case .object(let members) = json else {
            throw Error(description: "config file \(path) must hold a JSON object")
        }
        for (key, value) in members {
            guard let setting = settings.first(where: { $0.key == key }) else {
                throw Error(description: "config file \(path): unknown setting '\(key)'")
            }
            switch value {
            case _ where key == "apps":
                // (an object in the file; its JSON text anywhere else)
                try setting.apply(&config, value.isNull ? "" : String(decoding: value.serialized, as: UTF8.self))
            case .null: try setting.apply(&config, "")
            case .string(let text): try setting.apply(&config, text)
            case .number(let text): try setting.apply(&config, text)
            case .bool(let flag): try setting.apply(&config, flag ? "true" : "false")
            case .array(let items):
                let texts = items.compactMap { $0.stringValue }
                guard texts.count == items.count else { throw Error(description: "\(key) must be a list of strings") }
                try setting.apply(&config, texts.joined(separator: ","))
            case .object: throw Error(description: "\(key) must not be an object")
            }
        }
    }

    /// Bytes a secret that travels in a URL path may use.
    static let urlSafe = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// The fewest bytes of a bearer key (`serverKeys`, `metricsKey`) or of the Matrix notify
    /// secret: each is compared as sent by whoever can reach the port, so a short one is guessed.
    static let minimumKeyBytes = 16

    /// Cross-field checks that no single setting can make.
    static func validate(_ config: RelayConfig) throws(Error) {
        if config.serverKeys.contains(where: { $0.utf8.count < minimumKeyBytes }) {
            throw Error(description: "every one of serverKeys must be at least \(minimumKeyBytes) bytes long")
        }
        if let key = config.metricsKey, key.utf8.count < minimumKeyBytes {
            throw Error(description: "metricsKey must be at least \(minimumKeyBytes) bytes long")
        }
        if let secret = config.webhookSecret, WebhookSecret(secret) == nil {
            throw Error(description: "webhookSecret must be 'whsec_' followed by base64 key bytes")
        }
        if let secret = config.matrixNotifySecret,
            secret.utf8.count < minimumKeyBytes
                || !secret.utf8.allSatisfy({ byte in
                    Self.urlSafe.contains(byte)
                })
        {
            throw Error(
                description: "matrixNotifySecret must be at least \(minimumKeyBytes) characters of A-Z a-z 0-9 - _")
        }
        if let secret = config.clientTokenSecret, secret.utf8.count < 32 {
            throw Error(description: "clientTokenSecret must be at least 32 bytes long")
        }
        if let url = config.eventsUrl {
            guard config.pushAllowedHosts.allows(host: url.host, port: url.port) else {
                throw Error(description: "eventsUrl must be an http(s) URL whose host and port are in pushAllowedHosts")
            }
        }
        try validatePushServices(config)
        if config.pushRetryBaseMs > config.pushRetryCapMs {
            throw Error(description: "pushRetryBaseMs must not exceed pushRetryCapMs")
        }
        do {
            _ = try ListenSocket.parse(config.listen)
        } catch {
            throw Error(description: "\(error)")
        }
    }

    /// A push service's settings come as a set: all of them or none (then it is off); every
    /// app's, each named in the message (`apps.beta: …`).
    static func validatePushServices(_ config: RelayConfig) throws(Error) {
        for (id, app) in config.allApps {
            do {
                try validatePushServices(app)
            } catch {
                throw id == .default ? error : Error(description: "apps.\(id): \(error.description)")
            }
        }
        // An app_id listed by two apps would pick one of them silently.
        var owners: [String: AppID] = [:]
        for (id, app) in config.allApps {
            for pattern in app.matrixAppIds {
                if let other = owners.updateValue(id, forKey: pattern) {
                    throw Error(description: "matrixAppIds: '\(pattern)' is listed by both '\(other)' and '\(id)'")
                }
            }
        }
    }

    private static func validatePushServices(_ config: AppSettings) throws(Error) {
        let apns = [config.apnsKeyFile, config.apnsKeyId, config.apnsTeamId]
        if apns.contains(where: { $0 != nil }) {
            guard !apns.contains(where: { $0 == nil }) else {
                throw Error(description: "APNs needs apnsKeyFile, apnsKeyId and apnsTeamId together")
            }
            // Apple's key and team ids are 10 characters; anything else makes every push 403.
            for (name, value) in [("apnsKeyId", config.apnsKeyId), ("apnsTeamId", config.apnsTeamId)] {
                guard let value, value.utf8.count == 10, value.utf8.allSatisfy(Self.isAppleIdCharacter) else {
                    throw Error(description: "\(name) must be the 10 letters and digits Apple shows for it")
                }
            }
        }
        if config.vapidKeyFile != nil || config.vapidSubject != nil {
            guard let subject = config.vapidSubject, config.vapidKeyFile != nil else {
                throw Error(description: "Web Push needs vapidKeyFile and vapidSubject together")
            }
            // (A push service may refuse a subject it cannot reach anyone at: "mailto:" alone.)
            let contact = subject.hasPrefix("mailto:") ? subject.dropFirst(7) : subject.dropFirst(8)
            guard subject.hasPrefix("mailto:") || subject.hasPrefix("https://"),
                subject.hasPrefix("https://") || contact.contains("@"), contact.count >= 3
            else {
                throw Error(
                    description: "vapidSubject must be a mailto: address or an https: URL to reach you at, "
                        + "not '\(subject)'")
            }
        }
    }

    private static func isAppleIdCharacter(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }
}
