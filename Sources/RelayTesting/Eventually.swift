import Foundation

/// Whether `condition` holds within `seconds`, asked again every `interval` seconds until then.
///
/// For what a test waits for (a write stored, a socket closed, a log line written): a fixed
/// sleep followed by an assertion fails on a busy machine (two shared cores, the sanitizers make
/// the relay 5–20× slower), so a test polls up to a deadline far beyond what the step takes and
/// returns as soon as it happened. The default, 30 s, costs nothing unless the test fails.
/// Not for "it did not happen": there a test waits for something that must come later instead.
package func eventually(
    within seconds: Double = 30, every interval: Double = 0.05, _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while true {
        if try await condition() { return true }
        if Date() >= deadline { return false }
        try? await Task.sleep(nanoseconds: UInt64(interval * 1e9))
    }
}
