import RelayCore
import RelayHTTP
import RelayLive
import RelayLocks
import RelaySettings
import RelayStore
import RelayTelemetry
import RelayWebSocket
import Synchronization

extension RelayAPI {
    /// `GET /v1/stats`: the operator's overview in one read — this node, its sockets and online
    /// users, push jobs by state, receivers whose breaker is not closed, and running totals (the
    /// console plots rates from successive reads). The push job counts may be up to
    /// `statsCacheMs` old.
    func getStats(_ request: HTTPRequest, _ reply: Reply) throws(APIError) {
        try auth.requireServer(request)
        let uptime = clock.uptimeMs()
        let jobs: [JobState: Int]
        if let cached = jobCounts.withLock({ $0.value(now: uptime) }) {
            jobs = cached
        } else {
            jobs = try read(reply) { () throws(StoreError) in try store.pushJobCounts() }
            jobCounts.withLock { $0.store(jobs, now: uptime) }
        }
        let time = clock.now()
        let totals = metrics.totals
        let online = live.onlineUsers(limit: 100)
        var writer = JSONWriter(capacity: 1024)
        writer.beginObject()
        writer.key("nodes")
        writer.beginArray()
        writer.beginObject()
        writer.member("version", RelayConfig.version)
        writer.member("startedAt", startedAt)
        writer.member("uptimeSeconds", (time.milliseconds - startedAt.milliseconds) / 1000)
        writer.member("ready", !shuttingDown.load(ordering: .relaxed))
        writer.member("webSockets", Int64(live.socketCount))
        writer.endObject()
        writer.endArray()
        writer.member("usersOnline", Int64(online.total))
        writer.key("onlineUsers")
        writer.beginArray()
        for userId in online.first { writer.string(userId) }
        writer.endArray()
        writer.key("pushJobs")
        writer.beginObject()
        for state in JobState.allCases { writer.member(state.rawValue, Int64(jobs[state, default: 0])) }
        writer.endObject()
        writer.key("breakers")
        writer.beginArray()
        for (route, state) in openBreakers() {
            writer.beginObject()
            writer.member("transport", route.transport.rawValue)
            writer.member("credential", orNull: route.credential)
            writer.member("host", route.host)
            switch state {
            case .open(let until, _):
                writer.member("state", "open")
                writer.member("until", until)
            case .halfOpen, .closed:
                writer.member("state", "probing")
                writer.member("until", nil as Timestamp?)
            }
            writer.endObject()
        }
        writer.endArray()
        writer.key("totals")
        writer.beginObject()
        writer.member("messagesAccepted", Int64(clamping: totals.messagesAccepted))
        writer.member("inboxEntriesWritten", Int64(clamping: totals.recipientsAccepted))
        for (name, outcome): (String, Metrics.PushOutcome) in [
            ("pushesDelivered", .delivered), ("pushesRetried", .retried), ("pushesDead", .dead),
            ("pushesDeviceGone", .deviceGone),
        ] {
            writer.member(name, Int64(clamping: totals.pushes[outcome, default: 0]))
        }
        writer.member("signalsSent", Int64(clamping: totals.signals[.sent, default: 0]))
        writer.endObject()
        writer.endObject()
        reply.json(200, writer.bytes)
    }
}
