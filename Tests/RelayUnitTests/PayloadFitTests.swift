import RelayTransport
import Testing

/// How payloads are made to fit: the order things go in, and cuts on character boundaries.
@Suite struct PayloadFitTests {
    enum Level: CaseIterable { case full, small }

    /// `title|body|level` as bytes: full adds 10 bytes.
    static func build(_ level: Level, _ title: String?, _ body: String?) -> [UInt8] {
        Array("\(title ?? "-")|\(body ?? "-")|\(level == .full ? "0123456789" : "")".utf8)
    }

    static func fit(_ title: String?, _ body: String?, limit: Int) -> String {
        String(
            decoding: PayloadFit.fit(
                levels: Level.allCases, smallest: .small, title: title, body: body, limit: limit, build: build),
            as: UTF8.self)
    }

    @Test func theBodyIsCutThenTheTitleThenTheLevelDrops() {
        #expect(Self.fit("title", "body", limit: 100) == "title|body|0123456789")
        #expect(Self.fit("title", "body text", limit: 21) == "title|b…|0123456789")  // "…" is 3 bytes
        #expect(Self.fit("title", "body", limit: 20) == "title|…|0123456789")
        // Not even "…" for the body: it goes, and the title is cut.
        #expect(Self.fit("title", "body", limit: 19) == "tit…|-|0123456789")
        // The title cannot stay at the full level: the smaller level with the texts whole.
        #expect(Self.fit("title", "body", limit: 12) == "title|body|")
        #expect(Self.fit("title", "body", limit: 9) == "tit…|-|")
        // Nothing fits: the smallest level without texts, over the limit rather than nothing.
        #expect(Self.fit("title", "body", limit: 1) == "-|-|")
        #expect(Self.fit(nil, nil, limit: 1) == "-|-|")
    }

    @Test func cutsKeepWholeCharacters() {
        #expect(PayloadFit.longest("👍🏽👍🏽👍🏽", fits: { $0.utf8.count <= 11 }) == "👍🏽…")
        #expect(PayloadFit.longest("e\u{301}e\u{301}", fits: { $0.utf8.count <= 6 }) == "e\u{301}…")
        #expect(PayloadFit.longest("abc", fits: { _ in false }) == nil)
        #expect(PayloadFit.longest("", fits: { _ in true }) == "…")
    }

    @Test func providerWordsAreMadeSafeToStore() {
        #expect(ProviderAnswer.printable("a\r\nb\u{7F}c\u{85}d") == "a  b c d")
        #expect(ProviderAnswer.printable(String(repeating: "é", count: 300)).count == 200)
        #expect(ProviderAnswer.header("retry-after", in: [("Retry-After", "5"), ("retry-after", "6")]) == "5")
        #expect(ProviderAnswer.retryAfter(in: [("RETRY-AFTER", "Wed, 21 Oct 2015 07:28:00 GMT")]) == nil)
        #expect(ProviderAnswer.retryAfter(in: [("retry-after", "86401")]) == nil)
        #expect(ProviderAnswer.retryAfter(in: [("retry-after", "2")]) == 2000)
    }
}
