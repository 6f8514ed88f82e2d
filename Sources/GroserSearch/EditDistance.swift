/// Bounded edit distances over Unicode scalar values: insertions,
/// deletions, substitutions and transpositions of neighbours each count
/// one (optimal string alignment, as Meilisearch and Typesense count typos).
enum EditDistance {
    /// The distance between `a` and `b` when it is at most `limit`, else nil.
    static func within(_ a: [UInt32], _ b: ArraySlice<UInt32>, limit: Int) -> Int? {
        let n = a.count, m = b.count
        if abs(n - m) > limit { return nil }
        if n == 0 || m == 0 { return max(n, m) <= limit ? max(n, m) : nil }
        return rows(a, b, limit: limit, prefix: false)
    }

    /// The smallest distance between `a` and any prefix of `b` when it is
    /// at most `limit`, else nil: type-ahead with a typo ("малок" is one
    /// typo from the start of "молоко").
    static func toPrefix(_ a: [UInt32], of b: ArraySlice<UInt32>, limit: Int) -> Int? {
        if a.isEmpty { return 0 }
        if b.count + limit < a.count { return nil }
        return rows(a, b, limit: limit, prefix: true)
    }

    private static func rows(_ a: [UInt32], _ b: ArraySlice<UInt32>, limit: Int, prefix: Bool) -> Int? {
        // Three rows over b (columns 0...m), one row per scalar of a, in
        // one stack buffer: row i-2, row i-1 and row i.
        let m = b.count
        let big = limit + 1
        let width = m + 1
        return withUnsafeTemporaryAllocation(of: Int.self, capacity: 3 * width) { buffer -> Int? in
            var before = buffer.baseAddress!
            var previous = before + width
            var row = previous + width
            for j in 0...m { before[j] = big; previous[j] = min(j, big); row[j] = big }
            return a.withUnsafeBufferPointer { a in
                b.withUnsafeBufferPointer { b in
                    for i in 1...a.count {
                        row[0] = min(i, big)
                        var smallest = row[0]
                        let lo = max(1, i - limit), hi = min(m, i + limit)
                        if lo > 1 { row[lo - 1] = big }
                        if lo <= hi {
                            for j in lo...hi {
                                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                                var d = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost)
                                if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                                    d = min(d, before[j - 2] + 1)
                                }
                                row[j] = min(d, big)
                                smallest = min(smallest, row[j])
                            }
                        }
                        if hi < m { row[hi + 1] = big }
                        if smallest > limit { return nil }
                        let oldest = before
                        before = previous
                        previous = row
                        row = oldest
                    }
                    // `previous` holds the last row.
                    if prefix {
                        let lo = max(0, a.count - limit), hi = min(m, a.count + limit)
                        var best = big
                        if lo <= hi { for j in lo...hi { best = min(best, previous[j]) } }
                        return best <= limit ? best : nil
                    }
                    return previous[m] <= limit ? previous[m] : nil
                }
            }
        }
    }
}
