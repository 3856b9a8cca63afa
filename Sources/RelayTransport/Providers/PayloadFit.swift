/// Fits a provider's payload into its size limit (APNs and FCM 4096 bytes, a Web Push record
/// 3993): never by failing, always by saying less. The notice's body is shortened first, then
/// (body dropped) its title; when even that is not enough, the builder's next, smaller level is
/// tried with the texts whole again — so text survives as long as anything optional can go
/// instead. Texts are cut on a `Character` boundary (never inside a UTF-8 sequence, nor between
/// an emoji and its modifiers) and end with "…".
package enum PayloadFit {
    /// What marks a shortened text (3 bytes of UTF-8).
    package static let ellipsis = "…"

    /// The first payload whose `size` is within `limit`. `levels` go from the most complete
    /// payload to the least; `build(level, title, body)` must grow with the texts (a longer text
    /// never makes a smaller payload). When nothing fits, `smallest` without texts: every
    /// builder's smallest level fits by construction (ids are bounded at registration).
    package static func fit<Level, Payload>(
        levels: [Level], smallest: Level, title: String?, body: String?, limit: Int, size: (Payload) -> Int,
        build: (Level, _ title: String?, _ body: String?) -> Payload
    ) -> Payload {
        func fits(_ payload: Payload) -> Bool { size(payload) <= limit }
        for level in levels {
            let whole = build(level, title, body)
            if fits(whole) { return whole }
            if let body, let cut = longest(body, fits: { fits(build(level, title, $0)) }) {
                return build(level, title, cut)
            }
            if let title, let cut = longest(title, fits: { fits(build(level, $0, nil)) }) {
                return build(level, cut, nil)
            }
        }
        return build(smallest, nil, nil)
    }

    /// `fit` for payloads measured whole.
    package static func fit<Level>(
        levels: [Level], smallest: Level, title: String?, body: String?, limit: Int,
        build: (Level, _ title: String?, _ body: String?) -> [UInt8]
    ) -> [UInt8] {
        fit(levels: levels, smallest: smallest, title: title, body: body, limit: limit, size: \.count, build: build)
    }

    /// The longest cut of `text` (from the first `count − 1` characters down to "…" alone) that
    /// `fits`, by bisection (`fits` is monotonic in the length), or nil when not even "…" does.
    /// The whole text is the caller's first try, not this one's.
    package static func longest(_ text: String, fits: (String) -> Bool) -> String? {
        let characters = Array(text)
        guard fits(ellipsis) else { return nil }
        // Invariant: keeping `low` characters fits; keeping `high` does not (or is the whole text).
        var low = 0
        var high = characters.count
        while high - low > 1 {
            let middle = low + (high - low) / 2
            if fits(String(characters[..<middle]) + ellipsis) { low = middle } else { high = middle }
        }
        return String(characters[..<low]) + ellipsis
    }
}

extension Optional where Wrapped == String {
    /// The string unless it is nil or empty (an empty title shows as nothing: it is no text).
    var nonEmpty: String? {
        guard let self, !self.isEmpty else { return nil }
        return self
    }
}
