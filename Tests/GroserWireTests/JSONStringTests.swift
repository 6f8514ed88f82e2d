import Foundation
import GroserWire
import Testing

@Suite("JSON string literals")
struct JSONStringTests {
    @Test func controlsAreEscapedAndTheTextReadsBack() throws {
        let text = "a\"b\\c\nd\te\u{1b}[31m\u{7f}\u{9b}молоко 🥛"
        let quoted = JSONString.quoted(text)
        #expect(quoted == #""a\"b\\c\nd\te\u001b[31m\u007f\u009bмолоко 🥛""#)
        let back = try JSONSerialization.jsonObject(with: Data(quoted.utf8), options: .fragmentsAllowed) as? String
        #expect(back == text)
    }
}

@Suite("invisible formatting characters")
struct InvisibleFormattingTests {
    @Test func bidiControlsZeroWidthAndTagCharactersAreEscapedAsUTF16AndReadBack() throws {
        // A right-to-left override, an isolate pair, a zero-width space, a
        // line separator, and a tag character (above U+FFFF: a surrogate pair).
        let text = "Milk \u{202E}99.9\u{2066}x\u{2069}\u{200B}\u{2028}\u{E0041}"
        let quoted = JSONString.quoted(text)
        #expect(quoted == #""Milk \u202e99.9\u2066x\u2069\u200b\u2028\udb40\udc41""#)
        let back = try JSONSerialization.jsonObject(with: Data(quoted.utf8), options: .fragmentsAllowed) as? String
        #expect(back == text)
    }

    @Test func whatCountsAsInvisible() {
        let invisible: [Unicode.Scalar] = ["\u{AD}", "\u{61C}", "\u{200B}", "\u{200D}", "\u{200E}", "\u{200F}", "\u{202A}",
                                           "\u{202E}", "\u{2060}", "\u{2066}", "\u{2069}", "\u{2028}", "\u{2029}", "\u{FEFF}",
                                           "\u{E0001}"]
        let visible: [Unicode.Scalar] = ["a", " ", "\u{A0}", "ё", "й", "\u{301}", "%", "№", "🥛", "\u{2013}", "\u{2116}"]
        for s in invisible { #expect(s.isInvisibleFormatting, "U+\(String(s.value, radix: 16))") }
        for s in visible { #expect(!s.isInvisibleFormatting, "U+\(String(s.value, radix: 16))") }
    }
}
