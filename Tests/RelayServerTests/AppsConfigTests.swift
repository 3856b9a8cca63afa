import Foundation
import RelayCore
import RelaySettings
import Testing

/// `apps`: several apps' credentials in one relay, each checked as a set like the top-level ones.
@Suite struct AppsConfigTests {
    static func load(_ json: String, _ arguments: [String] = []) throws -> RelayConfig {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("apps-\(UUID().uuidString).json")
        try Data(json.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        return try ConfigLoader.load(arguments: ["--config", file.path] + arguments, environment: [:]).config
    }

    static let apns = #""apnsKeyFile":"/k.p8","apnsKeyId":"KEY2222222","apnsTeamId":"TEAM222222""#

    @Test func appsComeFromTheFileEachWithItsOwnServices() throws {
        let config = try Self.load(
            #"""
            {"fcmServiceAccountFile": "/default.json",
             "apps": {"beta": {\#(Self.apns), "apnsTopic": "com.example.beta",
                               "matrixAppIds": ["com.example.beta.ios", "com.example.*"]},
                      "acme": {"fcmServiceAccountFile": "/acme.json", "vapidKeyFile": "/v.pem",
                               "vapidSubject": "mailto:ops@acme.example", "matrixAppIds": ["com.example.acme.*"]}}}
            """#)
        let beta = try #require(AppID("beta"))
        let acme = try #require(AppID("acme"))
        #expect(config.allApps.map(\.id) == [.default, acme, beta])
        #expect(config.app(beta)?.apnsTopic == "com.example.beta")
        #expect(config.offers(.fcm) && !config.offers(.apns) && !config.offers(.webPush))
        #expect(config.offers(.apns, app: beta) && !config.offers(.fcm, app: beta))
        #expect(
            config.offers(.webPush, app: acme) && config.offers(.fcm, app: acme) && !config.offers(.apns, app: acme))
        #expect(!config.offers(.webhook, app: AppID("gone")!))
        // Matrix app_ids: an exact id, then the longest pattern, else `default`.
        #expect(config.app(matrixAppId: "com.example.beta.ios") == beta)
        #expect(config.app(matrixAppId: "com.example.acme.android") == acme)
        #expect(config.app(matrixAppId: "com.example.other") == beta)
        #expect(config.app(matrixAppId: "com.example") == .default)
        #expect(config.app(matrixAppId: "org.other.app") == .default)
        // The same JSON as text in a flag (or PUSHRELAY_APPS).
        let flagged = try ConfigLoader.load(
            arguments: ["--apps", #"{"beta": {\#(Self.apns)}}"#], environment: [:]
        ).config
        #expect(flagged.offers(.apns, app: beta))
    }

    @Test(arguments: [
        (#"{"default": {}}"#, "apps: 'default' is the app of the top-level push settings"),
        (#"{"a b": {}}"#, "apps: 'a b' is not an app id"),
        (
            #"{"beta": {"apnsKeyFile": "/k.p8"}}"#,
            "apps.beta: APNs needs apnsKeyFile, apnsKeyId and apnsTeamId together"
        ),
        (#"{"beta": {"vapidKeyFile": "/v.pem"}}"#, "apps.beta: Web Push needs vapidKeyFile and vapidSubject together"),
        (
            #"{"beta": {"apnsKeyFile": "/k.p8", "apnsKeyId": "short", "apnsTeamId": "TEAM222222"}}"#,
            "apps.beta: apnsKeyId must be the 10 letters and digits"
        ),
        (#"{"beta": {"fcmUrl": "https://x"}}"#, "apps.beta: unknown setting 'fcmUrl'"),
        (#"{"beta": {"apnsTopic": 7}}"#, "apps.beta.apnsTopic must be a non-empty string"),
        (#"{"beta": "x"}"#, "apps.beta must be an object"),
        (#"{"beta": {"matrixAppIds": ["com.*.ios"]}}"#, "apps.beta.matrixAppIds: each is an app_id or 'prefix.*'"),
        (
            #"{"a": {"matrixAppIds": ["x.y"]}, "b": {"matrixAppIds": ["x.y"]}}"#,
            "matrixAppIds: 'x.y' is listed by both 'a' and 'b'"
        ),
        (#"[1]"#, "apps must be a JSON object keyed by app id"),
    ])
    func appMistakesAreConfigurationErrors(_ apps: String, _ message: String) {
        do {
            _ = try Self.load(#"{"apps": \#(apps)}"#)
            Issue.record("\(apps) was taken")
        } catch {
            #expect("\(error)".contains(message), "\(apps): \(error)")
        }
    }
}
