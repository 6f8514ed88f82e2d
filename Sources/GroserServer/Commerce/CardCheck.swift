import GroserWire

/// What is kept of a card after checkout: its brand and last four digits.
public struct CardSummary: Sendable, Hashable {
    public var brand: String
    public var last4: String
}

/// Card validation, pure: no I/O, the clock passed in.
public enum CardCheck {
    /// Checks number (digits after removing spaces and dashes, 12 to 19 of
    /// them, Luhn), month 1...12, a 2- or 4-digit year, not expired (valid
    /// through the last day of its month), CVC of 3 or 4 digits.
    public static func validate(_ card: PaymentCard, now: (year: Int, month: Int)) -> Result<CardSummary, Refusal> {
        var digits: [UInt8] = []
        for ch in card.number.utf8 {
            switch ch {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digits.append(ch - UInt8(ascii: "0"))
            case UInt8(ascii: " "), UInt8(ascii: "-"): continue
            default: return .failure(Refusal(.invalidArgument, "The card number may hold only digits, spaces and dashes."))
            }
        }
        guard (12...19).contains(digits.count) else {
            return .failure(Refusal(.invalidArgument, "The card number has \(digits.count) digits; a card has 12 to 19."))
        }
        guard luhn(digits) else {
            return .failure(Refusal(.invalidArgument, "The card number is not valid (its check digit is wrong)."))
        }
        guard (1...12).contains(card.expiryMonth) else {
            return .failure(Refusal(.invalidArgument, "The expiry month must be 1 to 12, not \(card.expiryMonth)."))
        }
        let year: Int
        switch card.expiryYear {
        case 0...99:
            // The nearest such year from now that is not more than 50 years back,
            // so "01" read in December 2099 means 2101.
            var y = (now.year / 100) * 100 + Int(card.expiryYear)
            if y < now.year - 50 { y += 100 }
            year = y
        case 1000...9999: year = Int(card.expiryYear)
        default: return .failure(Refusal(.invalidArgument, "The expiry year must have 2 or 4 digits, not \(card.expiryYear)."))
        }
        if year < now.year || (year == now.year && Int(card.expiryMonth) < now.month) {
            return .failure(Refusal(.invalidArgument, "The card expired at the end of \(card.expiryMonth)/\(year)."))
        }
        let cvc = Array(card.cvc.utf8)
        guard (3...4).contains(cvc.count), cvc.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return .failure(Refusal(.invalidArgument, "The CVC must be 3 or 4 digits."))
        }
        let last4 = String(decoding: digits.suffix(4).map { $0 + UInt8(ascii: "0") }, as: UTF8.self)
        return .success(CardSummary(brand: brand(digits), last4: last4))
    }

    /// The Luhn checksum over decimal digits.
    public static func luhn(_ digits: [UInt8]) -> Bool {
        var sum = 0
        for (i, d) in digits.reversed().enumerated() {
            var v = Int(d)
            if i % 2 == 1 {
                v *= 2
                if v > 9 { v -= 9 }
            }
            sum += v
        }
        return sum % 10 == 0
    }

    /// The card network, from the number's leading digits.
    public static func brand(_ digits: [UInt8]) -> String {
        func prefix(_ n: Int) -> Int { digits.prefix(n).reduce(0) { $0 * 10 + Int($1) } }
        switch (prefix(1), prefix(2), prefix(4)) {
        case (_, _, 2200...2204): return "Mir"
        case (4, _, _): return "Visa"
        case (_, 51...55, _), (_, _, 2221...2720): return "Mastercard"
        case (_, 34, _), (_, 37, _): return "American Express"
        case (_, _, 3528...3589): return "JCB"
        case (_, 62, _): return "UnionPay"
        default: return "Card"
        }
    }
}
