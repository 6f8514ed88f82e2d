/// How many terminal cells text takes, by the rules terminals follow
/// (wcwidth): East Asian wide and fullwidth characters and emoji take two
/// cells, combining marks and other zero-width characters none, the rest
/// one. Counted per grapheme cluster, so an emoji sequence joined with
/// ZWJ, a flag or a letter with its accents takes the width of one.
enum CellWidth {
    /// The cells `text` takes on a terminal (after `Terminal.safe`, so
    /// there are no control characters in it).
    static func of(_ text: String) -> Int {
        var cells = 0
        for c in text { cells += of(c) }
        return cells
    }

    /// The cells one grapheme cluster takes: 0, 1 or 2.
    static func of(_ c: Character) -> Int {
        let scalars = c.unicodeScalars
        guard let first = scalars.first else { return 0 }
        if first.value < 0x7F { return first.value < 0x20 ? 0 : 1 }
        // An emoji shown as a picture: by default (U+1F95B GLASS OF MILK),
        // or a text-style one asked for with VS16 (U+2764 U+FE0F).
        for s in scalars where s.properties.isEmojiPresentation { return 2 }
        if first.properties.isEmoji && scalars.contains("\u{FE0F}") { return 2 }
        return scalarWidth(first)
    }

    /// One scalar's width, outside an emoji context.
    static func scalarWidth(_ s: Unicode.Scalar) -> Int {
        switch s.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        let v = s.value
        if (0x1160...0x11FF).contains(v) { return 0 }  // Hangul medial vowels and final consonants
        if v == 0x200B { return 0 }
        return isWide(v) ? 2 : 1
    }

    /// East Asian Width W or F (Unicode 15), the ranges terminals draw wide.
    static func isWide(_ v: UInt32) -> Bool {
        var lo = 0, hi = wide.count - 1
        while lo <= hi {
            let mid = (lo + hi) / 2
            if v < wide[mid].lowerBound { hi = mid - 1 } else if v > wide[mid].upperBound { lo = mid + 1 } else { return true }
        }
        return false
    }

    private static let wide: [ClosedRange<UInt32>] = [
        0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0...0x23F0, 0x23F3...0x23F3,
        0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F...0x267F, 0x2693...0x2693, 0x26A1...0x26A1,
        0x26AA...0x26AB, 0x26BD...0x26BE, 0x26C4...0x26C5, 0x26CE...0x26CE, 0x26D4...0x26D4, 0x26EA...0x26EA,
        0x26F2...0x26F3, 0x26F5...0x26F5, 0x26FA...0x26FA, 0x26FD...0x26FD, 0x2705...0x2705, 0x270A...0x270B,
        0x2728...0x2728, 0x274C...0x274C, 0x274E...0x274E, 0x2753...0x2755, 0x2757...0x2757, 0x2795...0x2797,
        0x27B0...0x27B0, 0x27BF...0x27BF, 0x2B1B...0x2B1C, 0x2B50...0x2B50, 0x2B55...0x2B55, 0x2E80...0x303E,
        0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF, 0xA960...0xA97F, 0xAC00...0xD7A3,
        0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x16FE0...0x16FE4,
        0x16FF0...0x16FF1, 0x17000...0x187F7, 0x18800...0x18CD5, 0x18D00...0x18D08, 0x1AFF0...0x1B2FB,
        0x1F004...0x1F004, 0x1F0CF...0x1F0CF, 0x1F18E...0x1F18E, 0x1F191...0x1F19A, 0x1F200...0x1F202,
        0x1F210...0x1F23B, 0x1F240...0x1F248, 0x1F250...0x1F251, 0x1F260...0x1F265, 0x1F300...0x1F320,
        0x1F32D...0x1F335, 0x1F337...0x1F37C, 0x1F37E...0x1F393, 0x1F3A0...0x1F3CA, 0x1F3CF...0x1F3D3,
        0x1F3E0...0x1F3F0, 0x1F3F4...0x1F3F4, 0x1F3F8...0x1F43E, 0x1F440...0x1F440, 0x1F442...0x1F4FC,
        0x1F4FF...0x1F53D, 0x1F54B...0x1F54E, 0x1F550...0x1F567, 0x1F57A...0x1F57A, 0x1F595...0x1F596,
        0x1F5A4...0x1F5A4, 0x1F5FB...0x1F64F, 0x1F680...0x1F6C5, 0x1F6CC...0x1F6CC, 0x1F6D0...0x1F6D2,
        0x1F6D5...0x1F6D7, 0x1F6DC...0x1F6DF, 0x1F6EB...0x1F6EC, 0x1F6F4...0x1F6FC, 0x1F7E0...0x1F7EB,
        0x1F7F0...0x1F7F0, 0x1F90C...0x1F93A, 0x1F93C...0x1F945, 0x1F947...0x1F9FF, 0x1FA70...0x1FA7C,
        0x1FA80...0x1FA88, 0x1FA90...0x1FABD, 0x1FABF...0x1FAC5, 0x1FACE...0x1FADB, 0x1FAE0...0x1FAE8,
        0x1FAF0...0x1FAF8, 0x20000...0x2FFFD, 0x30000...0x3FFFD,
    ]

    /// `text` padded with spaces to `cells` cells (on the right, or on the left).
    static func pad(_ text: String, to cells: Int, right: Bool = false) -> String {
        let fill = String(repeating: " ", count: max(0, cells - of(text)))
        return right ? fill + text : text + fill
    }
}
