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
