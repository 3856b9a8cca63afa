import RelayCore
import Testing

@Suite struct JSONParserTests {
    @Test func parsesEveryKindAndKeepsNumberText() throws {
        let value = try JSONParser.parse(
            Array(#" {"a":[1,-2.5e3,true,false,null],"b":{"c":"d"},"big":12345678901234567890} "#.utf8))
        #expect(value["a"] == .array([.number("1"), .number("-2.5e3"), .bool(true), .bool(false), .null]))
        #expect(value["b"]?["c"] == .string("d"))
        #expect(value["big"] == .number("12345678901234567890"))
        #expect(
            String(decoding: value.serialized, as: UTF8.self)
                == #"{"a":[1,-2.5e3,true,false,null],"b":{"c":"d"},"big":12345678901234567890}"#)
    }

    @Test func decodesEscapesAndSurrogatePairs() throws {
        let value = try JSONParser.parse(Array(#""\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00""#.utf8))
        #expect(value == .string("\"\\/\u{8}\u{c}\n\r\té😀"))
        // And back: control characters are escaped, the rest kept as UTF-8.
        #expect(String(decoding: value.serialized, as: UTF8.self) == #""\"\\/\u0008\u000c\n\r\té😀""#)
    }

    @Test(arguments: [
        "", " ", "{", "}", "[1,]", "{\"a\":1,}", "{\"a\"}", "{a:1}", "01", "1.", ".5", "-", "1e", "+1", "tru", "nul",
        "\"abc", "\"\\x\"", "\"\\ud800\"", "\"\\udc00x\"", "\"a\u{01}\"", "[1] 2", "NaN", "Infinity", "'a'",
    ])
    func rejectsMalformedDocuments(_ text: String) {
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(Array(text.utf8)) }
    }

    @Test func rejectsInvalidUTF8() {
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse([0x22, 0xED, 0xA0, 0x80, 0x22]) }  // surrogate
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse([0x22, 0xC0, 0xAF, 0x22]) }  // overlong
    }

    @Test func boundsNestingDepth() throws {
        let ok = String(repeating: "[", count: JSONParser.maxDepth) + String(repeating: "]", count: JSONParser.maxDepth)
        _ = try JSONParser.parse(Array(ok.utf8))
        let deep = String(repeating: "[", count: 100_000)
        #expect(throws: JSONParser.Error.self) { try JSONParser.parse(Array(deep.utf8)) }
    }

    @Test func canonicalFormIgnoresMemberOrder() throws {
        let a = try JSONParser.parse(Array(#"{"b":[{"y":1,"x":2}],"a":"s"}"#.utf8))
        let b = try JSONParser.parse(Array(#"{ "a" : "s", "b" : [ {"x":2, "y":1} ] }"#.utf8))
        #expect(a.canonical.serialized == b.canonical.serialized)
        #expect(String(decoding: a.canonical.serialized, as: UTF8.self) == #"{"a":"s","b":[{"x":2,"y":1}]}"#)
        let c = try JSONParser.parse(Array(#"{"b":[{"y":1,"x":3}],"a":"s"}"#.utf8))
        #expect(a.canonical.serialized != c.canonical.serialized)
    }

    /// I-JSON: a repeated name is refused (a signed `{"sub":"alice","sub":"bob"}` must not open
    /// anyone's inbox), in small and large objects, nested, and for canonically equal names.
    @Test func duplicateMemberNamesAreRefused() throws {
        let many = (0..<20).map { "\"k\($0)\":\($0)" }.joined(separator: ",")
        for text in [
            #"{"a":1,"a":2}"#, #"{"sub":"alice","sub":"bob"}"#, "{\(many),\"k19\":0}", #"{"x":{"y":1,"y":1}}"#,
            "{\"\u{E9}\":1,\"e\u{301}\":2}",
        ] {
            #expect(throws: JSONParser.Error.self) { try JSONParser.parse(Array(text.utf8)) }
        }
        #expect(try JSONParser.parse(Array("{\(many)}".utf8))["k19"] == .number("19"))
        _ = try JSONParser.parse(Array(#"[{"a":1},{"a":2}]"#.utf8))
    }

    @Test func writerSeparatesMembersAndElements() {
        var writer = JSONWriter()
        writer.beginObject()
        writer.key("list")
        writer.beginArray()
        writer.int(1)
        writer.beginObject()
        writer.key("x")
        writer.null()
        writer.key("y")
        writer.raw(Array("[true]".utf8))
        writer.endObject()
        writer.string("s")
        writer.endArray()
        writer.key("n")
        writer.bool(false)
        writer.endObject()
        #expect(String(decoding: writer.bytes, as: UTF8.self) == #"{"list":[1,{"x":null,"y":[true]},"s"],"n":false}"#)
    }

    @Test func writerWritesIntegersAsSwiftDoes() {
        let values: [Int64] = [0, 7, -7, 10, 1_234_567_890, .max, .min]
        var writer = JSONWriter()
        writer.beginArray()
        for value in values { writer.int(value) }
        writer.int(UInt64.max)
        writer.endArray()
        let expected = "[" + (values.map(String.init) + [String(UInt64.max)]).joined(separator: ",") + "]"
        #expect(String(decoding: writer.bytes, as: UTF8.self) == expected)
    }

    @Test func writerEscapesOnlyWhatJSONNeedsAndWritesTimestamps() throws {
        var writer = JSONWriter()
        writer.beginArray()
        for text in ["plain", "", "q\"b\\n\nr\rt\t\u{01}\u{1F}", "héllo 🎉", "end\""] { writer.string(text) }
        writer.endArray()
        #expect(
            String(decoding: writer.bytes, as: UTF8.self)
                == #"["plain","","q\"b\\n\nr\rt\t\u0001\u001f","héllo 🎉","end\""]"#)
        // What it writes parses back to the same strings.
        guard case .array(let items) = try JSONParser.parse(writer.bytes), items.count == 5 else {
            Issue.record("not an array of 5")
            return
        }
        #expect(items[2].stringValue == "q\"b\\n\nr\rt\t\u{01}\u{1F}")
        #expect(items[3].stringValue == "héllo 🎉")
        var object = JSONWriter()
        object.beginObject()
        object.member("at", Timestamp(milliseconds: 1_795_976_799_678))
        object.member("never", nil as Timestamp?)
        object.endObject()
        #expect(
            String(decoding: object.bytes, as: UTF8.self) == #"{"at":"2026-11-29T18:26:39.678Z","never":null}"#)
    }
}

@Suite struct UTF8ValidatorTests {
    @Test func acceptsValidAndRejectsInvalid() {
        #expect(UTF8Validator.isValid(Array("héllo wörld 😀 ✓".utf8)))
        #expect(UTF8Validator.isValid([0xF4, 0x8F, 0xBF, 0xBF]))  // U+10FFFF
        #expect(!UTF8Validator.isValid([0xF4, 0x90, 0x80, 0x80]))  // above U+10FFFF
        #expect(!UTF8Validator.isValid([0xE0, 0x80, 0x80]))  // overlong
        #expect(!UTF8Validator.isValid([0xED, 0xBF, 0xBF]))  // surrogate
        #expect(!UTF8Validator.isValid([0xE2, 0x82]))  // truncated
        #expect(!UTF8Validator.isValid([0x80]))  // lone continuation
        #expect(!UTF8Validator.isValid([0xFF]))
    }

    /// ASCII is skipped a word at a time: what follows it, at any offset, is still checked.
    @Test func checksWhatFollowsARunOfASCII() {
        for run in [7, 8, 9, 16, 23] {
            let ascii = [UInt8](repeating: UInt8(ascii: "a"), count: run)
            #expect(UTF8Validator.isValid(ascii))
            #expect(UTF8Validator.isValid(ascii + [0xC3, 0xA9] + ascii))
            #expect(!UTF8Validator.isValid(ascii + [0xFF] + ascii))
            #expect(!UTF8Validator.isValid(ascii + [0xE2, 0x82]))
            #expect(!UTF8Validator.isValid(ascii + [0xED, 0xBF, 0xBF] + ascii))
        }
    }
}
