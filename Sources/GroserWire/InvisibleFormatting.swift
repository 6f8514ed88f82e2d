/// The characters that change how the text around them is shown while
/// showing nothing themselves. A product name holding U+202E (right-to-left
/// override) prints its tail reversed, so "Milk 1 l ‮99.9 RUB" can show a
/// price the catalog does not hold (Trojan Source, CVE-2021-42574). Catalog
/// text refuses them (CatalogRecordRules), and every writer of text for a
/// person (the CLI's terminal output, JSON string literals) escapes them.
extension Unicode.Scalar {
    /// True for the bidirectional controls (U+061C, U+200E–U+200F,
    /// U+202A–U+202E, U+2066–U+2069), every other invisible format character
    /// (General_Category Cf: zero-width space and joiners U+200B–U+200D, word
    /// joiner U+2060, the byte-order mark U+FEFF, the soft hyphen U+00AD,
    /// tag characters …) and the line and paragraph separators U+2028 and
    /// U+2029, which some terminals and editors break lines at.
    public var isInvisibleFormatting: Bool {
        // Below the soft hyphen, U+00AD, nothing qualifies: ASCII text pays one comparison.
        guard value >= 0xAD else { return false }
        if value == 0x2028 || value == 0x2029 { return true }
        return properties.generalCategory == .format
    }
}
