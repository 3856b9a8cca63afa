import Foundation
import RelayCore
import RelayStore
import RelayTesting
import Testing

/// The delivery decisions, run by a seeded simulation of random interleavings of commits,
/// sockets, acks, badges, re-registrations, deletions, operator retries, receiver answers and
/// time: on `MemoryOutbox` alone for the invariants (docs/ARCHITECTURE.md §8), and on the memory
/// outbox and the SQL store that ships side by side (SQLite; PostgreSQL under `make
/// test-postgres`), comparing every job, entry and device after every step.
@Suite struct OutboxDifferentialTests {
    static let policy = DeliveryPolicy(
        pushDelayMs: 300, ackTimeoutMs: 800, retry: RetryPolicy(baseMilliseconds: 100, capMilliseconds: 2000))

    @Test(arguments: 0..<400)
    func randomInterleavingsKeepTheInvariants(seed: UInt64) async throws {
        var simulation = Simulation(seed: seed, store: nil)
        try await simulation.play()
        let violations = simulation.violations()
        #expect(violations.isEmpty, "seed \(seed): \(violations)\n\(simulation.trace.joined(separator: "\n"))")
    }

    /// One seed at a time: each opens a store of its own (on PostgreSQL, a database and its
    /// connections: together they would pass the server's connection limit).
    @Test(
        .serialized,
        arguments: 0..<UInt64(ProcessInfo.processInfo.environment["PUSHRELAY_TEST_POSTGRES"] == nil ? 100 : 40))
    func theSQLStoreAgreesWithTheMemoryOutbox(seed: UInt64) async throws {
        let path = try RelayProcess.freshDatabase(
            in: FileManager.default.temporaryDirectory, name: "differential-\(UUID().uuidString)")
        let store = SQLStoreTests.delivering(try SQLStore(database: path))
        defer { store.close() }
        var simulation = Simulation(seed: seed, store: store)
        try await simulation.play()
        #expect(
            simulation.disagreement == nil,
            "seed \(seed): \(simulation.disagreement ?? "")\n\(simulation.trace.joined(separator: "\n"))")
        if simulation.disagreement == nil {
            #expect(simulation.violations().isEmpty, "seed \(seed): \(simulation.violations())")
        }
    }

    /// A small deterministic generator (SplitMix64), so that a failing seed can be replayed.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// User `u` with three devices (the invariants are about it) and `v` with one, sharing some
    /// messages; the memory outbox, and the SQL store when there is one.
    struct Simulation {
        struct Push {
            var device: String
            var seqs: [Int64]
            var at: Int64
            var ackAtSend: Int64
            /// It carried a call's job among others (I5: a call rings alone).
            var callAmongOthers = false
        }

        let policy = OutboxDifferentialTests.policy
        var random: Generator
        let store: SQLStore?
        var memory = MemoryOutbox()
        var now: Int64 = 1_000_000
        let devices = ["d0", "d1", "d2"]
        var online: Set<String> = []
        /// The seq each device of `u` last caught up to (what it was sent), for its acks.
        var received: [String: Int64] = [:]
        var tokens = 0
        var messages = 0
        var pushes: [Push] = []
        /// Seq of `u` → (commit time, devices online at commit, devices registered at commit).
        var commits: [Int64: (at: Int64, online: Set<String>, registered: Set<String>)] = [:]
        var ackTimes: [Int64: Int64] = [:]
        var trace: [String] = []
        var disagreement: String?

        init(seed: UInt64, store: SQLStore?) {
            random = Generator(state: seed)
            self.store = store
        }

        var ack: Int64 { memory.inboxes["u"]?.ack ?? 0 }
        var head: Int64 { memory.inboxes["u"]?.head ?? 0 }

        mutating func roll(_ range: Range<Int>) -> Int { Int.random(in: range, using: &random) }

        mutating func play() async throws {
            for device in devices { try await register("u", device) }
            try await register("v", "w0")
            try await compare("registered")
            for _ in 0..<60 {
                now += Int64(roll(0..<251))
                let device = devices[roll(0..<3)]
                switch roll(0..<15) {
                case 0...2: try await commit()
                case 3: try await connect(device)
                case 4: disconnect(device)
                case 5: try await acknowledge(device)
                case 6: try await register("u", device)
                case 7: try await badge(device)
                case 8: try await retryDead()
                case 9 where roll(0..<3) == 0: try await delete(device)
                case 9: try await commit()
                default: try await fire(reregistering: roll(0..<8) == 0 ? device : nil)
                }
                if disagreement != nil { return }
            }
            // Settle: sockets close, time passes, the receiver recovers, every due job is sent.
            for device in devices { disconnect(device) }
            for _ in 0..<60 {
                now += 500
                try await fire(reregistering: nil, outcome: .delivered)
                if disagreement != nil { return }
            }
        }

        // MARK: Steps

        mutating func register(_ userId: String, _ deviceId: String) async throws {
            tokens += 1
            let target = "http://receiver/\(deviceId)/\(tokens)"
            memory.register(userId: userId, deviceId: deviceId, target: target, contentFree: false, now: now)
            if let store {
                let time = Timestamp(milliseconds: now)
                let _: (device: Device, created: Bool) = try await withCheckedThrowingContinuation { continuation in
                    store.putDevice(
                        Device(
                            userId: userId, deviceId: deviceId, target: target, platform: nil, contentFree: false,
                            createdAt: time, updatedAt: time), keeping: []
                    ) { continuation.resume(with: $0) }
                }
            }
            trace.append("t=\(now) register \(userId)/\(deviceId) → \(target)")
            try await compare("register")
        }

        mutating func delete(_ deviceId: String) async throws {
            memory.delete(userId: "u", deviceId: deviceId, now: now)
            if let store {
                let time = Timestamp(milliseconds: now)
                let _: Bool = try await withCheckedThrowingContinuation { continuation in
                    store.deleteDevice(userId: "u", deviceId: deviceId, at: time) { continuation.resume(with: $0) }
                }
            }
            trace.append("t=\(now) delete \(deviceId)")
            try await compare("delete")
        }

        mutating func commit() async throws {
            messages += 1
            let id = "m\(messages)"
            let recipients = roll(0..<3) == 0 ? ["u", "v"] : ["u"]
            let collapseKey = roll(0..<4) == 0 ? "k\(roll(0..<2))" : nil
            let badge = roll(0..<6) == 0 ? Int64(roll(0..<9)) : nil
            let priority: Priority = roll(0..<3) == 0 ? .high : .normal
            let push = Array("{\"title\":\"\(id)\"}".utf8)
            let call = roll(0..<8) == 0
            let onlineNow = ["u": online]
            let registered = Set(memory.devices["u"]?.filter(\.value.active).keys ?? [:].keys)
            let seqs = memory.accept(
                messageId: id, recipients: recipients, collapseKey: collapseKey, badge: badge,
                message: MemoryOutbox.Message(priority: priority, push: push), expiresAt: now + 60_000,
                online: onlineNow, policy: policy, now: now, call: call)
            commits[seqs[0]] = (now, online, registered)
            for device in online { received[device] = seqs[0] }  // sent live
            if let store {
                let json = try JSONParser.parse(
                    Array(
                        #"{"id":"\#(id)","recipients":[\#(recipients.map { "\"\($0)\"" }.joined(separator: ","))],"payload":{},"ttl":60}"#
                            .utf8))
                var incoming = try IncomingMessage(json: json, maxPayloadBytes: 65536, defaultTTLSeconds: 60)
                incoming.collapseKey = collapseKey
                incoming.badge = badge
                incoming.priority = priority
                incoming.push = push
                incoming.isCall = call
                var new = NewMessage(message: incoming, fingerprint: Array(id.utf8), now: Timestamp(milliseconds: now))
                new.delivery = policy
                new.online = onlineNow
                _ = try await SQLStoreTests.accept(store, new)
            }
            trace.append(
                "t=\(now) commit \(id)\(call ? " (call)" : "") to \(recipients) seq \(seqs) key \(collapseKey ?? "-") online \(online.sorted())"
            )
            try await compare("commit \(id)")
        }

        mutating func connect(_ device: String) async throws {
            online.insert(device)
            received[device] = head  // the catch-up
            let hold = policy.caughtUp(userId: "u", deviceId: device, through: head, now: now)
            memory.apply(hold, now: now)
            if let store {
                store.apply(hold, now: Timestamp(milliseconds: now))
                try await barrier(store)
            }
            trace.append("t=\(now) connect \(device)")
            try await compare("connect \(device)")
        }

        mutating func disconnect(_ device: String) {
            guard online.remove(device) != nil else { return }  // nothing else: its pushes still wait for the ack
            trace.append("t=\(now) disconnect \(device)")
        }

        /// An online device acks what it has.
        mutating func acknowledge(_ device: String) async throws {
            guard online.contains(device), let seq = received[device], seq > ack else { return }
            for acked in (ack + 1)...seq { ackTimes[acked] = now }
            memory.ack(userId: "u", seq: seq, now: now)
            if let store {
                let time = Timestamp(milliseconds: now)
                let _: AckOutcome = try await withCheckedThrowingContinuation { continuation in
                    store.ack(userId: "u", seq: seq, epoch: nil, now: time) { continuation.resume(with: $0) }
                }
            }
            trace.append("t=\(now) ack \(seq) by \(device)")
            try await compare("ack \(seq)")
        }

        mutating func badge(_ device: String) async throws {
            let badge = Int64(roll(0..<5))
            memory.queueBadge(userId: "u", deviceId: device, badge: badge, now: now)
            if let store {
                let time = Timestamp(milliseconds: now)
                let _: Void = try await withCheckedThrowingContinuation { continuation in
                    store.queueBadge(userId: "u", deviceId: device, badge: badge, now: time) {
                        continuation.resume(with: $0)
                    }
                }
            }
            trace.append("t=\(now) badge \(badge) for \(device)")
            try await compare("badge")
        }

        /// The operator retries the oldest dead job (the same one in both: the n-th job of each)
        /// of an active device, for a message not read yet (a replay of a read message, or for a
        /// disabled device, is the operator's to judge: the invariants are not about it).
        mutating func retryDead() async throws {
            let ack = ack
            let active = memory.devices.mapValues { $0.filter(\.value.active) }
            let jobs = Self.ordered(memory.jobs)
            guard
                let index = jobs.firstIndex(where: {
                    $0.state == .dead && active[$0.userId]?[$0.deviceId] != nil
                        && ($0.userId != "u" || $0.kind == .clear || $0.seq > ack)
                })
            else { return }
            memory.retry(job: jobs[index].id, now: now, expiresAt: now + 60_000)
            if let store {
                let id = Self.ordered(try store.outboxSnapshot().jobs)[index].id
                let time = Timestamp(milliseconds: now)
                let _: RetryOutcome = try await withCheckedThrowingContinuation { continuation in
                    store.retryDelivery(id: id, now: time, expiresAt: Timestamp(milliseconds: now + 60_000)) {
                        continuation.resume(with: $0)
                    }
                }
            }
            trace.append("t=\(now) operator retries job \(index + 1)")
            try await compare("retry")
        }

        /// The notifier: every device with due jobs gets one push covering them, answered alike
        /// (a device may register a new token while its push is in flight).
        mutating func fire(reregistering device: String?, outcome fixed: DeliveryOutcome? = nil) async throws {
            var admission = HostAdmission.takingAll
            let batches = memory.pushBatches(now: now, limit: 100, skipping: [:], choosing: &admission)
            let stored = try store?.duePushes(now: Timestamp(milliseconds: now), limit: 100)
            if let stored, Self.shape(stored) != Self.shape(batches) {
                disagreement = "t=\(now) due batches: memory \(Self.shape(batches)), SQL \(Self.shape(stored))"
                return
            }
            guard !batches.isEmpty else { return }
            if let device { try await register("u", device) }
            let outcome = fixed ?? randomOutcome()
            let draw = Double.random(in: 0...1, using: &random)
            var outcomes: [(batch: PushBatch, result: DeliveryPolicy.Verdict)] = []
            for batch in batches {
                let verdict = policy.answered(
                    outcome, attempts: batch.attempts, expiresAt: batch.expiresAt.milliseconds, now: now,
                    random: { draw }
                ).verdict
                outcomes.append((batch, verdict))
                let seqs = memory.jobs.filter { batch.jobIds.contains($0.id) && $0.kind.announcesMessage }.map(\.seq)
                trace.append("t=\(now) push \(batch.userId)/\(batch.deviceId) \(batch.kind) seqs \(seqs) → \(verdict)")
                if verdict == .delivered, batch.userId == "u", !seqs.isEmpty {
                    let kinds = memory.jobs.filter { batch.jobIds.contains($0.id) }.map(\.kind)
                    pushes.append(
                        Push(
                            device: batch.deviceId, seqs: seqs, at: now, ackAtSend: ack,
                            callAmongOthers: kinds.contains(.call) && kinds.count > 1))
                }
            }
            let gone = memory.finish(outcomes, now: now)
            if let store, let stored {
                let byDevice = Dictionary(stored.map { ($0.deviceKey, $0) }, uniquingKeysWith: { a, _ in a })
                let storedOutcomes = outcomes.compactMap { outcome in
                    byDevice[outcome.batch.deviceKey].map { (batch: $0, result: outcome.result) }
                }
                let storedGone: [String: GoneDecision] = try await withCheckedThrowingContinuation { continuation in
                    store.finish(storedOutcomes, now: Timestamp(milliseconds: now)) { continuation.resume(with: $0) }
                }
                if storedGone != gone { disagreement = "t=\(now) gone: memory \(gone), SQL \(storedGone)" }
            }
            try await compare("push answered \(outcome)")
        }

        mutating func randomOutcome() -> DeliveryOutcome {
            switch roll(0..<15) {
            case 0..<6: .delivered
            case 6..<9: .retry(reason: "HTTP 503", notBeforeMilliseconds: nil)
            // (Due later than a catch-up's hold: the hold must keep it.)
            case 14: .retry(reason: "HTTP 429", notBeforeMilliseconds: 2500)
            case 9: .misconfigured(reason: "APNs: InvalidProviderToken")
            case 10: .requeue(reason: "REFUSED_STREAM")
            case 11: .deviceGone(reason: "HTTP 410", since: roll(0..<2) == 0 ? now - 100 : nil)
            default: .dead(reason: "HTTP 400")
            }
        }

        // MARK: Comparing

        /// A batch without the store's own ids.
        static func shape(_ batches: [PushBatch]) -> [String] {
            batches.map {
                "\($0.userId)/\($0.deviceId) \($0.target) \($0.kind) \($0.seqFrom)-\($0.seqTo) \($0.messageId ?? "-") "
                    + "\($0.unread) \($0.priority) \($0.collapseKey ?? "-") \($0.attempts) \($0.expiresAt.milliseconds) "
                    + "\($0.push.map { String(decoding: $0, as: UTF8.self) } ?? "-") n=\($0.jobIds.count)"
            }.sorted()
        }

        /// The jobs in one order for both stores (the devices of a commit are not read in the
        /// same order by every engine): by creation, then whose, then the store's own order.
        static func ordered(_ jobs: [MemoryOutbox.Job]) -> [MemoryOutbox.Job] {
            jobs.sorted {
                ($0.createdAt, $0.userId, $0.deviceId, $0.id) < ($1.createdAt, $1.userId, $1.deviceId, $1.id)
            }
        }

        /// The jobs without the store's own ids and webhook ids.
        static func shape(_ snapshot: MemoryOutbox.Snapshot) -> MemoryOutbox.Snapshot {
            var shaped = snapshot
            shaped.jobs = ordered(snapshot.jobs).map { job in
                var job = job
                job.id = 0
                job.webhookId = ""
                return job
            }
            return shaped
        }

        mutating func compare(_ step: String) async throws {
            guard let store, disagreement == nil else { return }
            let stored = Self.shape(try store.outboxSnapshot())
            let expected = Self.shape(memory.snapshot)
            guard stored != expected else { return }
            var differences: [String] = []
            if stored.jobs.count != expected.jobs.count {
                differences.append("jobs: memory \(expected.jobs.count), SQL \(stored.jobs.count)")
            }
            for (index, (a, b)) in zip(expected.jobs, stored.jobs).enumerated() where a != b {
                differences.append("job \(index + 1): memory \(a)\n    SQL \(b)")
            }
            if stored.entries != expected.entries {
                differences.append("entries: memory \(expected.entries), SQL \(stored.entries)")
            }
            if stored.devices != expected.devices {
                differences.append("devices: memory \(expected.devices), SQL \(stored.devices)")
            }
            disagreement = "t=\(now) after \(step):\n" + differences.joined(separator: "\n")
        }

        /// Waits until the writes queued before it are committed (`apply` is fire and forget).
        func barrier(_ store: SQLStore) async throws {
            let _: Void = try await withCheckedThrowingContinuation { continuation in
                store.recordLastOnline(userId: "barrier", deviceId: "b", at: Timestamp(milliseconds: now)) {
                    continuation.resume(with: $0)
                }
            }
        }

        // MARK: Invariants

        /// I1–I5 for user `u`, once everything has settled.
        func violations() -> [String] {
            var found: [String] = []
            let jobs = memory.jobs.filter { $0.userId == "u" && $0.kind.announcesMessage }
            for (seq, commit) in commits {
                for device in commit.registered where !jobs.contains(where: { $0.seq == seq && $0.deviceId == device })
                {
                    found.append("I1: seq \(seq) got no job for registered device \(device)")
                }
            }
            for job in jobs {
                let covered = pushes.contains { $0.device == job.deviceId && $0.seqs.contains(job.seq) }
                let ended: Bool
                switch job.state {
                case .pending: ended = false
                case .delivered: ended = covered
                case .dead: ended = true
                case .cancelled: ended = job.lastError != CancelReason.acked.text || job.seq <= ack
                }
                if !(ended || job.seq <= ack) {
                    found.append("I1: seq \(job.seq) device \(job.deviceId) ended with nothing (\(job.state))")
                }
            }
            for push in pushes where push.seqs.contains(where: { $0 <= push.ackAtSend }) {
                found.append("I2: push to \(push.device) at \(push.at) covers acked seqs \(push.seqs)")
            }
            for push in pushes {
                for seq in push.seqs {
                    guard let commit = commits[seq], commit.online.contains(push.device), let acked = ackTimes[seq],
                        acked - commit.at < policy.ackTimeoutMs
                    else { continue }
                    found.append("I3: device \(push.device) got seq \(seq) live, acked in time, and was pushed")
                }
            }
            for push in pushes where push.callAmongOthers {
                found.append("I5: a call was pushed to \(push.device) at \(push.at) with other jobs: \(push.seqs)")
            }
            for device in devices {
                let covers = pushes.filter { $0.device == device }.flatMap(\.seqs)
                if Set(covers).count != covers.count {
                    found.append("I4: device \(device) was pushed one seq twice: \(covers.sorted())")
                }
            }
            return found
        }
    }
}
