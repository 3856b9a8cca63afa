/// The outcomes of a batch's messages as their writes complete (in any order, possibly in several
/// transactions): the batch is answered once every message has its outcome, with all of them in
/// order — or, if any message was not stored, with the first such error (some of the others may
/// be stored: a retry with the same ids finds them as replays).
package struct BatchTally: Sendable {
    private var outcomes: [AcceptOutcome?]
    private var pending: Int
    private var failure: StoreError?

    package init(count: Int) {
        outcomes = Array(repeating: nil, count: count)
        pending = count
    }

    /// Records message `index`'s result; returns the batch's once it is the last one.
    package mutating func record(
        _ index: Int, _ result: Result<AcceptOutcome, StoreError>
    ) -> Result<[AcceptOutcome], StoreError>? {
        guard outcomes.indices.contains(index), outcomes[index] == nil, pending > 0 else { return nil }
        switch result {
        case .success(let outcome): outcomes[index] = outcome
        case .failure(let error): failure = failure ?? error
        }
        pending -= 1
        guard pending == 0 else { return nil }
        if let failure { return .failure(failure) }
        return .success(outcomes.compactMap { $0 })
    }
}
