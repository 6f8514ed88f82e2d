import GroserServer
import GroserWire
import Testing

/// Card validation as checkout runs it: the number, the expiry against a
/// clock the test chooses, the CVC, and what is kept of the card.
@Suite("card check")
struct CardCheckTests {
    /// May 2026: the clock most rows run against.
    static let may2026 = (year: 2026, month: 5)

    static func card(_ number: String, month: UInt32 = 12, year: UInt32 = 2030, cvc: String = "123") -> PaymentCard {
        PaymentCard(number: number, expiryMonth: month, expiryYear: year, cvc: cvc, holderName: "IVAN PETROV")
    }

    static func check(_ card: PaymentCard, now: (year: Int, month: Int) = may2026) -> Result<CardSummary, Refusal> {
        CardCheck.validate(card, now: now)
    }

    /// The refusal's message, after checking it is INVALID_ARGUMENT, one
    /// sentence, and free of the card number in any spelling.
    @discardableResult
    static func expectRefused(_ card: PaymentCard, now: (year: Int, month: Int) = may2026,
                              sourceLocation: SourceLocation = #_sourceLocation) -> String? {
        switch check(card, now: now) {
        case .success(let summary):
            Issue.record("accepted \(card.number) as \(summary)", sourceLocation: sourceLocation)
            return nil
        case .failure(let refusal):
            let message = refusal.status.message
            #expect(refusal.status.code == .invalidArgument, sourceLocation: sourceLocation)
            expectOneSentence(message, sourceLocation: sourceLocation)
            let digits = String(card.number.filter(\.isNumber))
            if digits.count >= 6 {
                #expect(!message.contains(digits), "\(message)", sourceLocation: sourceLocation)
                #expect(!message.contains(card.number), "\(message)", sourceLocation: sourceLocation)
                // Not even a stretch of it long enough to be a card prefix plus last four.
                let prefix = String(digits.prefix(6)), suffix = String(digits.suffix(6))
                #expect(!message.contains(prefix) && !message.contains(suffix), "\(message)", sourceLocation: sourceLocation)
            }
            return message
        }
    }

    static func expectOneSentence(_ message: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(!message.isEmpty, sourceLocation: sourceLocation)
        #expect(message.first?.isUppercase == true, "\(message)", sourceLocation: sourceLocation)
        #expect(message.hasSuffix("."), "\(message)", sourceLocation: sourceLocation)
        #expect(!message.dropLast().contains(". ") && !message.contains("\n"), "\(message)", sourceLocation: sourceLocation)
    }

    static func expectAccepted(_ card: PaymentCard, now: (year: Int, month: Int) = may2026,
                               sourceLocation: SourceLocation = #_sourceLocation) -> CardSummary? {
        switch check(card, now: now) {
        case .success(let summary): return summary
        case .failure(let refusal):
            Issue.record("refused: \(refusal.status)", sourceLocation: sourceLocation)
            return nil
        }
    }

    // MARK: Number

    @Test("well-known test numbers pass Luhn", arguments: [
        "4111111111111111",      // Visa
        "5555555555554444",      // Mastercard, 51–55
        "2223003122003222",      // Mastercard, 2221–2720
        "2200000000000004",      // Mir
        "378282246310005",       // American Express, 15 digits
        "4000056655665556",      // Visa debit
    ])
    func validNumbers(number: String) {
        #expect(Self.expectAccepted(Self.card(number)) != nil)
        #expect(CardCheck.luhn(number.utf8.map { $0 - UInt8(ascii: "0") }))
    }

    @Test("a mistyped digit or swapped pair fails Luhn", arguments: [
        "4111111111111112",      // last digit off by one
        "4111111111111121",      // swapped pair
        "5555555555554445",
        "2223003122003223",
        "2200000000000005",
        "2200000000000040",      // swapped pair
        "378282246310006",
        "738282246310005",       // swapped first pair
    ])
    func luhnFailures(number: String) {
        let message = Self.expectRefused(Self.card(number))
        #expect(message?.contains("check digit") == true, "\(message ?? "")")
        #expect(!CardCheck.luhn(number.utf8.map { $0 - UInt8(ascii: "0") }))
    }

    @Test("spaces and dashes, as printed on cards and typed by people, are ignored", arguments: [
        "4111 1111 1111 1111",
        "4111-1111-1111-1111",
        " 4111 1111-1111 1111 ",
        "3782 822463 10005",
        "2200  0000  0000  0004",
    ])
    func separatorsIgnored(number: String) {
        let summary = Self.expectAccepted(Self.card(number))
        #expect(summary?.last4 == String(number.filter(\.isNumber).suffix(4)))
    }

    @Test("anything else in the number is refused", arguments: [
        "4111 1111 1111 111a",
        "4111.1111.1111.1111",
        "4111/1111/1111/1111",
        "4111\t1111\t1111\t1111",
        "４１１１１１１１１１１１１１１１",   // full-width digits
        "+4111111111111111",
        "",
    ])
    func otherCharactersRefused(number: String) {
        Self.expectRefused(Self.card(number))
    }

    @Test("12 to 19 digits (Luhn-valid) are a card; 11 and 20 are not", arguments: [
        ("41111000000", false),                  // 11 digits, Luhn-valid
        ("411111111117", true),                  // 12
        ("555500000008", true),                  // 12
        ("4111111111111111110", true),           // 19
        ("2200000000000000004", true),           // 19
        ("41111000000000000006", false),         // 20 digits, Luhn-valid
        ("0", false),
    ])
    func length(number: String, accepted: Bool) {
        #expect(CardCheck.luhn(number.utf8.map { $0 - UInt8(ascii: "0") }), "the row must be Luhn-valid")
        if accepted {
            #expect(Self.expectAccepted(Self.card(number))?.last4 == String(number.suffix(4)))
        } else {
            let message = Self.expectRefused(Self.card(number))
            #expect(message?.contains("\(number.count) digits") == true, "\(message ?? "")")
        }
    }

    @Test("the brand comes from the leading digits", arguments: [
        ("4111111111111111", "Visa"),
        ("4000000000000002", "Visa"),
        ("5100000000000008", "Mastercard"),
        ("5500000000000004", "Mastercard"),
        ("5555555555554444", "Mastercard"),
        ("2221000000000009", "Mastercard"),
        ("2223003122003222", "Mastercard"),
        ("2720000000000005", "Mastercard"),
        ("2200000000000004", "Mir"),
        ("2204000000000000", "Mir"),
        ("340000000000009", "American Express"),
        ("370000000000002", "American Express"),
        ("378282246310005", "American Express"),
        ("3528000000000007", "JCB"),
        ("3589000000000003", "JCB"),
        ("6200000000000005", "UnionPay"),
        // Just outside each range: a valid card of no brand we name.
        ("2205000000000009", "Card"),
        ("2199000000000007", "Card"),
        ("2220000000000000", "Card"),
        ("2721000000000004", "Card"),
        ("5000000000000009", "Card"),
        ("5600000000000003", "Card"),
        ("3527000000000008", "Card"),
        ("3590000000000000", "Card"),
        ("3500000000000009", "Card"),
        ("6011000000000004", "Card"),
        ("1000000000000008", "Card"),
        ("9000000000000001", "Card"),
    ])
    func brand(number: String, brand: String) {
        #expect(Self.expectAccepted(Self.card(number))?.brand == brand)
    }

    @Test("only the last four digits are kept", arguments: [
        ("4111 1111 1113 1234", "1234"),
        ("4000-0566-5566-5556", "5556"),
        ("3782 822463 10005", "0005"),
        ("411111111117", "1117"),
    ])
    func last4(number: String, last4: String) throws {
        let summary = try #require(Self.expectAccepted(Self.card(number)))
        #expect(summary.last4 == last4)
    }

    // MARK: Expiry

    @Test("the month is 1 to 12", arguments: [UInt32(0), 13, 99, UInt32.max])
    func badMonth(month: UInt32) {
        let message = Self.expectRefused(Self.card("4111111111111111", month: month))
        #expect(message?.contains("month") == true, "\(message ?? "")")
    }

    @Test("every month 1 to 12 of a future year is fine", arguments: 1...12)
    func everyMonth(month: Int) {
        #expect(Self.expectAccepted(Self.card("4111111111111111", month: UInt32(month), year: 2027)) != nil)
    }

    @Test("a 2-digit year is in the clock's century; a 4-digit year is itself", arguments: [
        // (year as typed, clock year, clock month, accepted)
        (UInt32(27), 2026, 5, true),     // 27 → 2027
        (UInt32(26), 2026, 5, true),     // 12/26, this year
        (UInt32(25), 2026, 5, false),    // 25 → 2025, expired
        (UInt32(27), 2028, 1, false),    // 27 → 2027, a year ago
        (UInt32(0), 2026, 5, false),     // 00 → 2000
        (UInt32(99), 2026, 5, true),     // 99 → 2099
        (UInt32(2027), 2026, 5, true),
        (UInt32(2025), 2026, 5, false),
        (UInt32(9999), 2026, 5, true),
        (UInt32(1000), 2026, 5, false),
    ])
    func years(year: UInt32, clockYear: Int, clockMonth: Int, accepted: Bool) {
        let card = Self.card("4111111111111111", month: 12, year: year)
        if accepted {
            #expect(Self.expectAccepted(card, now: (clockYear, clockMonth)) != nil)
        } else {
            let message = Self.expectRefused(card, now: (clockYear, clockMonth))
            #expect(message?.contains("expired") == true, "\(message ?? "")")
        }
    }

    @Test("a year of 3 or 5+ digits is refused", arguments: [UInt32(100), 123, 999, 10000, 20270, UInt32.max])
    func badYearWidth(year: UInt32) {
        let message = Self.expectRefused(Self.card("4111111111111111", year: year), now: (2026, 5))
        #expect(message?.contains("2 or 4 digits") == true, "\(message ?? "")")
    }

    @Test("a card is valid through the last day of its month", arguments: [
        // (card month, card year, clock year, clock month, accepted)
        (UInt32(5), UInt32(2026), 2026, 5, true),    // expires this month
        (UInt32(5), UInt32(26), 2026, 5, true),      // the same, 2 digits
        (UInt32(4), UInt32(2026), 2026, 5, false),   // expired last month
        (UInt32(4), UInt32(26), 2026, 5, false),
        (UInt32(6), UInt32(2026), 2026, 5, true),
        (UInt32(12), UInt32(2025), 2026, 1, false),  // December, seen in January
        (UInt32(12), UInt32(25), 2026, 1, false),
        (UInt32(12), UInt32(2025), 2025, 12, true),  // December, in December
        (UInt32(1), UInt32(2026), 2025, 12, true),   // January next year, in December
        (UInt32(1), UInt32(26), 2025, 12, true),
        (UInt32(1), UInt32(2026), 2026, 1, true),    // January, in January
        (UInt32(1), UInt32(2026), 2026, 2, false),
        (UInt32(12), UInt32(2026), 2026, 5, true),   // later this year
    ])
    func expiry(month: UInt32, year: UInt32, clockYear: Int, clockMonth: Int, accepted: Bool) {
        let card = Self.card("5555 5555 5555 4444", month: month, year: year)
        if accepted {
            #expect(Self.expectAccepted(card, now: (clockYear, clockMonth)) != nil)
        } else {
            let message = Self.expectRefused(card, now: (clockYear, clockMonth))
            #expect(message?.contains("expired") == true, "\(message ?? "")")
        }
    }

    // MARK: CVC

    @Test("the CVC is 3 or 4 ASCII digits", arguments: [
        ("123", true), ("000", true), ("1234", true), ("7391", true),
        ("12", false), ("12345", false), ("", false), ("12a", false), ("1 23", false),
        (" 123", false), ("123 ", false), ("-12", false), ("١٢٣", false),   // Arabic-Indic digits
        ("１２３", false),   // full-width digits
    ])
    func cvc(cvc: String, accepted: Bool) {
        let card = Self.card("4111111111111111", cvc: cvc)
        if accepted {
            #expect(Self.expectAccepted(card) != nil)
        } else {
            let message = Self.expectRefused(card)
            #expect(message?.contains("CVC") == true, "\(message ?? "")")
            if cvc.count >= 3 { #expect(message?.contains(cvc) == false, "the message repeats the CVC: \(message ?? "")") }
        }
    }

    // MARK: Messages

    @Test("every refusal is one sentence and never repeats the number", arguments: [
        CardCheckTests.card("4111 1111 1111 1112"),                              // Luhn
        CardCheckTests.card("4111-1111-1111-111x"),                              // a letter
        CardCheckTests.card("4111 1111 111"),                                    // 11 digits
        CardCheckTests.card("4111 1111 1111 1111 1111"),                         // 20 digits
        CardCheckTests.card("4111111111111111", month: 13),
        CardCheckTests.card("4111111111111111", month: 0),
        CardCheckTests.card("4111111111111111", month: 1, year: 2020),
        CardCheckTests.card("4111111111111111", year: 202),
        CardCheckTests.card("4111111111111111", cvc: "73915"),
        CardCheckTests.card("4111111111111111", cvc: "7a9"),
    ])
    func messages(card: PaymentCard) {
        let message = Self.expectRefused(card)
        #expect(message.map { !$0.contains("1111") } ?? false, "\(message ?? "")")
    }

    @Test("the first problem found is the one reported: number before expiry before CVC")
    func order() {
        let all = Self.card("4111111111111112", month: 13, year: 123, cvc: "1")
        #expect(Self.expectRefused(all)?.contains("check digit") == true)
        let expiry = Self.card("4111111111111111", month: 13, year: 123, cvc: "1")
        #expect(Self.expectRefused(expiry)?.contains("month") == true)
        let cvc = Self.card("4111111111111111", month: 12, year: 2030, cvc: "1")
        #expect(Self.expectRefused(cvc)?.contains("CVC") == true)
    }

    @Test("a card's description withholds the number and CVC")
    func description() {
        let card = Self.card("4111 1111 1111 1111", cvc: "7391")
        for text in [card.description, card.debugDescription, "\(card)", String(reflecting: card)] {
            #expect(!text.contains("4111") && !text.contains("1111") && !text.contains("7391"), "\(text)")
        }
    }
}
