import Foundation
import Synchronization

/// `pushrelay-load`: WebSocket load for PushRelay (and for nchan, its peer in the benchmarks).
///
///     pushrelay-load idle    --url http://127.0.0.1:18080 --key K --connections 10000 --server-pid PID
///     pushrelay-load latency --url http://127.0.0.1:18080 --key K --subscribers 100 --rate 1000 --duration 10
///     ... --target nchan     (subscribe to /sub/<user>, publish to /pub/<user>, no auth)
///     ... --publish-url http://127.0.0.1:18081   (post to another node of a cluster)
///     ... --target mosquitto --url http://127.0.0.1:9001 --mqtt-port 1883
///                            (MQTT over WebSocket, persistent sessions, QoS 1; publish over TCP)
///
/// Prints one JSON object with the figures. Loopback only; every run is bounded by its options.
@main
struct LoadTool {
    struct Options {
        var mode = "latency"
        var host = "127.0.0.1"
        var port: UInt16 = 18080
        var key = "benchkey-0123456789"
        var target = "pushrelay"
        var connections = 1000
        var rate = 1000
        var duration = 10.0
        var serverPid: Int32 = 0
        var hold = 2.0
        var publishers = 4
        var mqttPort: UInt16 = 1883
        /// Where messages are posted (`--publish-url`); the subscribers' node when nil.
        var publishPort: UInt16?

        init(_ arguments: [String]) {
            var iterator = arguments.makeIterator()
            if let first = iterator.next() { mode = first }
            while let flag = iterator.next() {
                let value = iterator.next() ?? ""
                switch flag {
                case "--url":
                    (host, port) = Self.hostAndPort(value)
                case "--publish-url": publishPort = Self.hostAndPort(value).port
                case "--key": key = value
                case "--target": target = value
                case "--connections", "--subscribers": connections = Int(value) ?? connections
                case "--rate": rate = Int(value) ?? rate
                case "--duration": duration = Double(value) ?? duration
                case "--server-pid": serverPid = Int32(value) ?? 0
                case "--hold": hold = Double(value) ?? hold
                case "--publishers": publishers = Int(value) ?? publishers
                case "--mqtt-port": mqttPort = UInt16(value) ?? mqttPort
                default: fatalExit("unknown option \(flag)")
                }
            }
        }

        static func hostAndPort(_ url: String) -> (host: String, port: UInt16) {
            let parts = url.replacingOccurrences(of: "http://", with: "").split(separator: ":")
            return (String(parts.first ?? "127.0.0.1"), UInt16(parts.count > 1 ? String(parts[1]) : "80") ?? 80)
        }
    }

    static func main() {
        raiseFileLimit()
        let options = Options(Array(CommandLine.arguments.dropFirst()))
        let prefix = "l\(UInt32.random(in: 0...UInt32.max))-"
        let users = (0..<options.connections).map { "\(prefix)\($0)" }
        let pool = SubscriberPool()
        let rssBefore = rssKiB(options.serverPid)
        let started = Date()
        do {
            try pool.connect(
                host: options.host, port: options.port, paths: try paths(for: users, options),
                mqttTopics: options.target == "mosquitto" ? users : nil)
        } catch {
            fatalExit("connect failed: \(error)")
        }
        pool.start()
        let deadline = Date().addingTimeInterval(60)
        while pool.openCount.load(ordering: .relaxed) + pool.closedCount.load(ordering: .relaxed) < users.count,
            Date() < deadline
        {
            usleep(50_000)
        }
        let connectSeconds = Date().timeIntervalSince(started)
        let open = pool.openCount.load(ordering: .relaxed)
        var result: [String: Any] = [
            "target": options.target, "mode": options.mode, "connections": users.count, "open": open,
            "connectSeconds": round(connectSeconds * 100) / 100,
        ]
        switch options.mode {
        case "idle":
            Thread.sleep(forTimeInterval: options.hold)
            let rssAfter = rssKiB(options.serverPid)
            result["rssBeforeKiB"] = rssBefore
            result["rssAfterKiB"] = rssAfter
            result["rssPerConnectionKiB"] =
                open > 0 ? round(Double(rssAfter - rssBefore) / Double(open) * 100) / 100 : 0
            result["stillOpen"] = pool.openCount.load(ordering: .relaxed)
        default:
            Thread.sleep(forTimeInterval: 1)  // let welcome / synced frames settle
            _ = pool.drainLatencies()
            let sent = publish(users: users, options)
            Thread.sleep(forTimeInterval: 1)  // stragglers
            let samples = pool.drainLatencies().sorted()
            func percentile(_ p: Double) -> Double {
                guard !samples.isEmpty else { return -1 }
                let index = min(samples.count - 1, Int(Double(samples.count) * p))
                return Double(samples[index]) / 1e6
            }
            result["rate"] = options.rate
            result["sent"] = sent
            result["received"] = samples.count
            result["p50ms"] = round(percentile(0.50) * 1000) / 1000
            result["p99ms"] = round(percentile(0.99) * 1000) / 1000
            result["maxMs"] = round((Double(samples.last ?? 0) / 1e6) * 1000) / 1000
        }
        pool.stop()
        if let data = try? JSONSerialization.data(withJSONObject: result, options: [.sortedKeys]) {
            print(String(decoding: data, as: UTF8.self))
        }
    }

    /// WebSocket paths: with a client token per user for PushRelay, a channel per user for nchan.
    static func paths(for users: [String], _ options: Options) throws -> [String] {
        if options.target == "mosquitto" { return users.map { _ in "/" } }
        guard options.target == "pushrelay" else { return users.map { "/sub/\($0)" } }
        let tokens = Mutex<[String: String]>([:])
        let chunks = stride(from: 0, to: users.count, by: max(1, users.count / 8 + 1)).map {
            Array(users[$0..<min(users.count, $0 + users.count / 8 + 1)])
        }
        DispatchQueue.concurrentPerform(iterations: chunks.count) { index in
            let client = HTTPClient(host: options.host, port: options.port)
            for user in chunks[index] {
                let body = Array(#"{"userId":"\#(user)","deviceId":"load","ttl":86400}"#.utf8)
                guard
                    let answer = try? client.request(
                        "POST", "/v1/tokens", body: body,
                        headers: [("Authorization", "Bearer \(options.key)"), ("Content-Type", "application/json")]),
                    answer.status == 200,
                    let json = try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any],
                    let token = json["token"] as? String
                else { continue }
                tokens.withLock { $0[user] = token }
            }
        }
        let minted = tokens.withLock { $0 }
        return users.map { "/v1/ws?access_token=\(minted[$0] ?? "missing")" }
    }

    /// Posts `rate` messages a second for `duration` seconds, each to one random subscriber,
    /// each carrying its send time; returns how many were accepted.
    static func publish(users: [String], _ options: Options) -> Int {
        let accepted = Atomic<Int>(0)
        let publishers = max(1, options.publishers)
        let perPublisher = Double(options.rate) / Double(publishers)
        let total = Int(Double(options.rate) * options.duration)
        DispatchQueue.concurrentPerform(iterations: publishers) { worker in
            let client = HTTPClient(host: options.host, port: options.publishPort ?? options.port)
            let mqtt =
                options.target == "mosquitto"
                ? try? MQTTPublisher(host: options.host, port: options.mqttPort, clientId: "pub-\(worker)-\(getpid())")
                : nil
            let start = Clock.nowNanos()
            var n = 0
            while true {
                let due = start + Int64(Double(n) / perPublisher * 1e9)
                let now = Clock.nowNanos()
                if due > now { usleep(UInt32((due - now) / 1000)) }
                if n * publishers + worker >= total { break }
                let user = users[(n * publishers + worker) % users.count]
                let stamp = Clock.nowNanos()
                let status: Int
                if options.target == "pushrelay" {
                    let body =
                        #"{"id":"\#(user)-\#(worker)-\#(n)","recipients":["\#(user)"],"payload":{"t":\#(stamp)}}"#
                    status =
                        (try? client.request(
                            "POST", "/v1/messages", body: Array(body.utf8),
                            headers: [("Authorization", "Bearer \(options.key)"), ("Content-Type", "application/json")]))?
                        .status ?? 0
                } else if let mqtt {
                    status = (try? mqtt.publish(topic: user, payload: Array(#"{"t":\#(stamp)}"#.utf8))) != nil ? 200 : 0
                } else {
                    status =
                        (try? client.request("POST", "/pub/\(user)", body: Array(#"{"t":\#(stamp)}"#.utf8)))?.status
                        ?? 0
                }
                if (200..<300).contains(status) { accepted.add(1, ordering: .relaxed) }
                n += 1
            }
        }
        return accepted.load(ordering: .relaxed)
    }

    static func rssKiB(_ pid: Int32) -> Int {
        guard pid > 0, let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else {
            return 0
        }
        for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        return 0
    }

    static func raiseFileLimit() {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    static func fatalExit(_ message: String) -> Never {
        FileHandle.standardError.write(Data((message + "\n").utf8))
        exit(2)
    }
}
