import GroserSearch

/// The stemmers searches and catalog changes borrow: one per thread at a time.
enum SearchStemmers {
    static let pool = StemmerPool()
}
