import CStemmer
import GroserSystem

/// Snowball stemmers for Russian and English (libstemmer). One instance is
/// not thread-safe (libstemmer keeps its work area in the stemmer), so a
/// search takes one from `StemmerPool` and gives it back.
public final class Stemmer {
    private let russian: OpaquePointer
    private let english: OpaquePointer
    /// A search's work area, one word per product of the store searched,
    /// kept zeroed between searches: a search allocates nothing the size
    /// of the store (it is lent with the stemmer, to one thread at a time).
    var scratch: [UInt64] = []

    public init() {
        // Both algorithms are compiled into libstemmer; nil would mean a
        // broken library, which no request can work around.
        guard let r = sb_stemmer_new("russian", "UTF_8"), let e = sb_stemmer_new("english", "UTF_8") else {
            fatalError("libstemmer has no Russian or English stemmer")
        }
        russian = r
        english = e
    }

    deinit {
        sb_stemmer_delete(russian)
        sb_stemmer_delete(english)
    }

    /// The stem of a normalised word (lower case, ё as е): Russian for a
    /// Cyrillic word, English for a Latin one, the word itself otherwise
    /// (numbers, mixed scripts, words under three letters).
    public func stem(_ word: String, script: Script) -> String {
        String(decoding: stem(bytes: Array(word.utf8), script: script), as: UTF8.self)
    }

    /// `stem(_:script:)` over UTF-8 bytes.
    public func stem(bytes word: [UInt8], script: Script) -> [UInt8] {
        let algorithm: OpaquePointer
        switch script {
        case .cyrillic: algorithm = russian
        case .latin: algorithm = english
        case .other: return word
        }
        guard word.count >= 3 else { return word }
        return word.withUnsafeBufferPointer { b -> [UInt8] in
            guard let out = sb_stemmer_stem(algorithm, b.baseAddress, Int32(b.count)) else { return word }
            let n = Int(sb_stemmer_length(algorithm))
            return Array(UnsafeBufferPointer(start: out, count: n))
        }
    }
}

/// Stemmers to lend to the threads that search: each borrow gets one no
/// other thread holds.
public final class StemmerPool: Sendable {
    // @unchecked inside Locked: a Stemmer is only used by the thread holding it.
    private let free = Locked<[UncheckedStemmer]>([])

    private struct UncheckedStemmer: @unchecked Sendable { let stemmer: Stemmer }

    public init() {}

    public func with<R>(_ body: (Stemmer) -> R) -> R {
        let lent = free.withLock { $0.popLast() }?.stemmer ?? Stemmer()
        defer { free.withLock { $0.append(UncheckedStemmer(stemmer: lent)) } }
        return body(lent)
    }
}
