import GroserWire
import Testing

@Suite("money")
struct MoneyExponentTests {
    @Test(arguments: [("RUB", 2), ("USD", 2), ("JPY", 0), ("KRW", 0), ("KWD", 3), ("CLF", 4), ("XYZ", 2)])
    func theCurrencysMinorUnitDigits(currency: String, digits: Int) {
        #expect(Money.exponent(of: currency) == digits)
    }
}
