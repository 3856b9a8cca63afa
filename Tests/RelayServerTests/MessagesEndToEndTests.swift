import Foundation
import RelayTesting
import Testing

/// The real `pushrelay` binary on an ephemeral port, spoken to over real HTTP.
@Suite(.serialized) struct MessagesEndToEndTests {
    @Test func idempotentPosts() async throws {
        let relay = try RelayProcess()
        let body: [String: Any] = ["id": "m-1", "recipients": ["alice", "bob"], "payload": ["text": "hi"]]
        let first = try await relay.request("POST", "/v1/messages", json: body)
        #expect(first.status == 202)
        let recipients = first.object["recipients"] as? [[String: Any]]
        #expect(recipients?.map { $0["seq"] as? Int } == [1, 1])
        #expect(recipients?.map { $0["delivery"] as? String } == ["stored", "stored"])

        // Same id, same body (other spacing): the first answer again, no new seq.
        let replay = try await relay.request(
            "POST", "/v1/messages",
            rawBody: Data(#"{ "id" : "m-1", "recipients" : ["alice","bob"], "payload" : {"text":"hi"} }"#.utf8),
            headers: ["Content-Type": "application/json"])
        #expect(replay.status == 200)
        #expect(replay.body == first.body)

        var changed = body
        changed["payload"] = ["text": "edited"]
        let conflict = try await relay.request("POST", "/v1/messages", json: changed)
        #expect(conflict.status == 409)
        #expect(conflict.errorCode == "idempotency_conflict")

        let inbox = try await relay.request("GET", "/v1/users/alice/messages")
        #expect(inbox.object["headSeq"] as? Int == 1)
    }

    @Test func concurrentPostersGetGaplessSeqsAndPagedCatchUp() async throws {
        let relay = try RelayProcess()
        let posters = 8
        let perPoster = 500
        let seqs = try await withThrowingTaskGroup(of: [Int].self) { group in
            for poster in 0..<posters {
                group.addTask {
                    var mine: [Int] = []
                    for n in 0..<perPoster {
                        let response = try await relay.request(
                            "POST", "/v1/messages",
                            json: ["id": "p\(poster)-\(n)", "recipients": ["carol"], "payload": ["n": n, "p": poster]])
                        guard response.status == 202,
                            let seq = (response.object["recipients"] as? [[String: Any]])?.first?["seq"] as? Int
                        else {
                            throw RelayProcess.LaunchError(
                                description: "post failed: \(response.status) \(response.text)")
                        }
                        mine.append(seq)
                    }
                    return mine
                }
            }
            return try await group.reduce(into: [Int]()) { $0 += $1 }
        }
        #expect(seqs.sorted() == Array(1...posters * perPoster))

        // Paged catch-up as a client: every seq once, in order, across pages.
        let token = try await relay.token(userId: "carol")
        var after = 0
        var seen: [Int] = []
        var epoch: String?
        var pages = 0
        while true {
            var path = "/v1/users/carol/messages?after=\(after)&limit=700"
            if let epoch { path += "&epoch=\(epoch)" }
            let page = try await relay.request("GET", path, token: token)
            #expect(page.status == 200)
            #expect(page.object["complete"] as? Bool == true)
            epoch = page.object["epoch"] as? String
            let messages = page.object["messages"] as? [[String: Any]] ?? []
            seen += messages.compactMap { $0["seq"] as? Int }
            after = seen.last ?? after
            pages += 1
            if page.object["hasMore"] as? Bool != true { break }
        }
        #expect(seen == Array(1...posters * perPoster))
        #expect(pages == 6)
        // A client's pages mark what they handed over `fetched`, up to the last one's newest seq.
        func state(_ id: String) async throws -> String? {
            let message = try await relay.request("GET", "/v1/messages/\(id)")
            return (message.object["recipients"] as? [[String: Any]])?.first?["state"] as? String
        }
        let newest = try await relay.request("GET", "/v1/users/carol/messages?after=\(posters * perPoster - 1)")
        let newestId = (newest.object["messages"] as? [[String: Any]])?.first?["id"] as? String ?? "?"
        #expect(try await eventually { try await state(newestId) == "fetched" })
    }

    @Test func restartKeepsEverything() async throws {
        let relay = try RelayProcess()
        for n in 1...20 {
            let response = try await relay.request(
                "POST", "/v1/messages", json: ["id": "r\(n)", "recipients": ["dave"], "payload": ["n": n]])
            #expect(response.status == 202)
        }
        let token = try await relay.token(userId: "dave")
        let before = try await relay.request("GET", "/v1/users/dave/messages", token: token)
        #expect(try await relay.request("POST", "/v1/users/dave/ack", json: ["seq": 7], token: token).status == 204)
        #expect(relay.stop() == 0)  // graceful: SIGTERM exits 0
        try relay.restart()
        let after = try await relay.request("GET", "/v1/users/dave/messages", token: token)  // token still valid
        #expect(after.status == 200)
        #expect(after.object["epoch"] as? String == before.object["epoch"] as? String)
        #expect((after.object["messages"] as? [[String: Any]])?.count == 20)
        let next = try await relay.request(
            "POST", "/v1/messages", json: ["id": "r21", "recipients": ["dave"], "payload": [:]])
        #expect((next.object["recipients"] as? [[String: Any]])?.first?["seq"] as? Int == 21)
        let state = try await relay.request("GET", "/v1/messages/r7")
        #expect((state.object["recipients"] as? [[String: Any]])?.first?["state"] as? String == "acked")
    }

    /// A batch: each item gets the single endpoint's status and body, in order; the valid ones
    /// are stored together; the whole batch retried is a replay item by item.
    @Test func batchesAnswerEachItemLikeTheSingleEndpoint() async throws {
        let relay = try RelayProcess()
        let before = try await relay.request(
            "POST", "/v1/messages", json: ["id": "old", "recipients": ["fay"], "payload": ["v": 1]])
        #expect(before.status == 202)
        let batch: [String: Any] = [
            "messages": [
                ["id": "b-1", "recipients": ["fay", "gus"], "payload": ["n": 1]],
                ["id": "b-2", "recipients": [], "payload": ["n": 2]],
                ["id": "old", "recipients": ["fay"], "payload": ["v": 2]],
                ["id": "old", "recipients": ["fay"], "payload": ["v": 1]],
                ["id": "b-3", "recipients": ["fay"], "payload": ["n": 3], "ttl": 0],
                ["id": "b-4", "recipients": ["fay"], "payload": ["n": 4], "priority": "high"],
            ]
        ]
        let first = try await relay.request("POST", "/v1/messages/batch", json: batch)
        #expect(first.status == 200)
        let results = first.object["results"] as? [[String: Any]] ?? []
        #expect(results.map { $0["status"] as? Int } == [202, 400, 409, 200, 400, 202])
        #expect(results.map { $0["id"] as? String } == ["b-1", "b-2", "old", "old", "b-3", "b-4"])
        #expect((results[1]["error"] as? [String: Any])?["code"] as? String == "invalid_field")
        #expect((results[0]["recipients"] as? [[String: Any]])?.map { $0["seq"] as? Int } == [2, 1])
        #expect((results[5]["recipients"] as? [[String: Any]])?.first?["seq"] as? Int == 3)

        let again = try await relay.request("POST", "/v1/messages/batch", json: batch)
        let replayed = again.object["results"] as? [[String: Any]] ?? []
        #expect(replayed.map { $0["status"] as? Int } == [200, 400, 409, 200, 400, 200])
        let page = try await relay.request("GET", "/v1/users/fay/messages")
        #expect(
            (page.object["messages"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["old", "b-1", "b-4"])

        // Not a batch at all: the whole request is refused.
        for bad: [String: Any] in [["messages": []], ["messages": [1, 2]], ["nothing": true]] {
            #expect(try await relay.request("POST", "/v1/messages/batch", json: bad).status == 400)
        }
        #expect(try await relay.request("GET", "/v1/messages/batch").status == 405)
        let reserved = try await relay.request(
            "POST", "/v1/messages", json: ["id": "batch", "recipients": ["fay"], "payload": [:]])
        #expect(reserved.status == 400)
    }

    /// `kill -9` while batches are being posted: every item of every batch that got its 200 is
    /// there once after the restart, seqs gapless.
    @Test func crashDuringBatchesLosesNothingAcknowledged() async throws {
        let relay = try RelayProcess()
        let acknowledged = AcknowledgedIds()
        let burst = Task {
            await withTaskGroup(of: Void.self) { group in
                for poster in 0..<2 {
                    group.addTask {
                        for batch in 0..<500 {
                            let ids = (0..<50).map { "p\(poster)-\(batch)-\($0)" }
                            let messages = ids.map { ["id": $0, "recipients": ["hal"], "payload": ["b": batch]] }
                            guard
                                let response = try? await relay.request(
                                    "POST", "/v1/messages/batch", json: ["messages": messages])
                            else { return }  // the relay is gone
                            guard response.status == 200 else { continue }
                            for id in ids { await acknowledged.add(id) }
                        }
                    }
                }
            }
        }
        while await acknowledged.count < 1000 { try await Task.sleep(nanoseconds: 5_000_000) }
        relay.crash()
        await burst.value
        let acked = await acknowledged.ids
        try relay.restart()

        let token = try await relay.token(userId: "hal")
        var stored: [String] = []
        var seqs: [Int] = []
        var after = 0
        while true {
            let page = try await relay.request("GET", "/v1/users/hal/messages?after=\(after)&limit=10000", token: token)
            let messages = page.object["messages"] as? [[String: Any]] ?? []
            stored += messages.compactMap { $0["id"] as? String }
            seqs += messages.compactMap { $0["seq"] as? Int }
            after = seqs.last ?? after
            if page.object["hasMore"] as? Bool != true { break }
        }
        #expect(acked.isSubset(of: Set(stored)), "acknowledged but missing: \(acked.subtracting(stored).prefix(5))")
        #expect(seqs == Array(1...max(1, seqs.count)))
        #expect(Set(stored).count == stored.count)
    }

    /// `kill -9` in the middle of a burst: every message that got a 2xx is there after the
    /// restart, and the seqs are still 1…n without a gap.
    @Test func crashDuringBurstLosesNothingAcknowledged() async throws {
        let relay = try RelayProcess()
        let acknowledged = AcknowledgedIds()
        let burst = Task {
            await withTaskGroup(of: Void.self) { group in
                for poster in 0..<4 {
                    group.addTask {
                        for n in 0..<2000 {
                            let id = "k\(poster)-\(n)"
                            guard
                                let response = try? await relay.request(
                                    "POST", "/v1/messages",
                                    json: ["id": id, "recipients": ["erin"], "payload": ["n": n]])
                            else { return }  // the relay is gone
                            if response.status == 202 { await acknowledged.add(id) }
                        }
                    }
                }
            }
        }
        // Let the burst run, then pull the plug.
        while await acknowledged.count < 300 { try await Task.sleep(nanoseconds: 5_000_000) }
        relay.crash()
        await burst.value
        let acked = await acknowledged.ids
        try relay.restart()

        let token = try await relay.token(userId: "erin")
        var stored: [String] = []
        var seqs: [Int] = []
        var after = 0
        while true {
            let page = try await relay.request(
                "GET", "/v1/users/erin/messages?after=\(after)&limit=10000", token: token)
            let messages = page.object["messages"] as? [[String: Any]] ?? []
            stored += messages.compactMap { $0["id"] as? String }
            seqs += messages.compactMap { $0["seq"] as? Int }
            after = seqs.last ?? after
            if page.object["hasMore"] as? Bool != true { break }
        }
        #expect(acked.count >= 300)
        #expect(acked.isSubset(of: Set(stored)), "acknowledged but missing: \(acked.subtracting(stored).prefix(5))")
        #expect(seqs == Array(1...max(1, seqs.count)))
        #expect(Set(stored).count == stored.count)
    }
}

actor AcknowledgedIds {
    private(set) var ids = Set<String>()
    var count: Int { ids.count }
    func add(_ id: String) { ids.insert(id) }
}
