import RelayCore
import Testing

@Suite struct SignalAdmissionTests {
    func at(_ milliseconds: Int64) -> Timestamp { Timestamp(milliseconds: milliseconds) }

    /// The rate belongs to the user, not to a socket: 20 sockets of one user share one burst.
    @Test func aUserHasOneRateWhateverItsSockets() {
        var admission = SignalAdmission(maxInFlight: 1000, ratePerSecond: 10)
        var choices: [SignalAdmission.Choice] = []
        for _ in 0..<20 {  // one signal from each of 20 sockets, then one more from each
            choices.append(admission.admit(userId: "sam", now: at(0)))
            choices.append(admission.admit(userId: "sam", now: at(0)))
        }
        #expect(choices.filter { $0 == .forward }.count == 20)  // the burst: twice the rate
        #expect(choices.filter { $0 == .rateLimited }.count == 20)
        // Another user is not affected.
        #expect(admission.admit(userId: "tia", now: at(0)) == .forward)
        // 100 ms at 10/s is one more signal.
        #expect(admission.admit(userId: "sam", now: at(100)) == .forward)
        #expect(admission.admit(userId: "sam", now: at(100)) == .rateLimited)
        // Someone typing at a human pace never runs out.
        for step in 1...100 { #expect(admission.admit(userId: "sam", now: at(100 + Int64(step) * 500)) == .forward) }
    }

    /// With the receiver not answering, at most `maxInFlight` forwards are outstanding; the rest
    /// are dropped (not queued), and each finished forward makes room for one more.
    @Test func forwardsInFlightAreBounded() {
        var admission = SignalAdmission(maxInFlight: 3, ratePerSecond: 10)
        let users = (0..<10).map { "user\($0)" }
        let choices = users.map { admission.admit(userId: $0, now: at(0)) }
        #expect(choices == Array(repeating: .forward, count: 3) + Array(repeating: .busy, count: 7))
        #expect(admission.inFlight == 3)
        admission.finished()
        #expect(admission.admit(userId: "user9", now: at(10)) == .forward)
        #expect(admission.admit(userId: "user8", now: at(10)) == .busy)
        for _ in 0..<10 { admission.finished() }  // more ends than starts never goes negative
        #expect(admission.inFlight == 0)
        #expect(admission.admit(userId: "user8", now: at(20)) == .forward)
    }

    /// A signal dropped for the global budget does not spend the user's rate.
    @Test func aBusyDropDoesNotSpendTheUsersRate() {
        var admission = SignalAdmission(maxInFlight: 1, ratePerSecond: 1)
        #expect(admission.admit(userId: "other", now: at(0)) == .forward)
        for _ in 0..<10 { #expect(admission.admit(userId: "sam", now: at(0)) == .busy) }
        admission.finished()
        #expect(admission.admit(userId: "sam", now: at(0)) == .forward)
        admission.finished()
        #expect(admission.admit(userId: "sam", now: at(0)) == .forward)  // burst 2
        admission.finished()
        #expect(admission.admit(userId: "sam", now: at(0)) == .rateLimited)
    }

    /// Many users each sending once: the budgets that refilled are forgotten, so memory follows
    /// the users sending now, not every user ever seen.
    @Test func idleUsersAreForgotten() {
        var admission = SignalAdmission(maxInFlight: 1_000_000, ratePerSecond: 10)
        for n in 0..<100_000 {
            let time = at(Int64(n))  // 1 ms apart: a user is idle for 2 s after 2,000 others
            #expect(admission.admit(userId: "user\(n)", now: time) == .forward)
            admission.finished()
        }
        #expect(admission.trackedUsers < 5000)
    }
}
