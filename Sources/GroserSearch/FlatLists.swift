/// Many short lists of numbers in one array (compressed sparse rows): list
/// `i` is `items[offsets[i]..<offsets[i + 1]]`. An index holds tens of
/// thousands of lists (a posting list per word); one array each would cost
/// a heap block and a header apiece, more than most lists hold.
struct FlatLists: Sendable {
    private(set) var offsets: [UInt32]
    private(set) var items: [UInt32]

    init(_ lists: [[UInt32]]) {
        var offsets: [UInt32] = []
        offsets.reserveCapacity(lists.count + 1)
        offsets.append(0)
        var items: [UInt32] = []
        items.reserveCapacity(lists.reduce(0) { $0 + $1.count })
        for l in lists {
            items.append(contentsOf: l)
            offsets.append(UInt32(items.count))
        }
        self.offsets = offsets
        self.items = items
    }

    var count: Int { offsets.count - 1 }

    @inline(__always)
    subscript(_ i: Int) -> ArraySlice<UInt32> { items[Int(offsets[i])..<Int(offsets[i + 1])] }

    @inline(__always)
    func length(_ i: Int) -> Int { Int(offsets[i + 1] - offsets[i]) }

    /// Every list, as separate arrays (to extend them).
    var lists: [[UInt32]] { (0..<count).map { Array(self[$0]) } }

    var memoryBytes: Int { 64 + offsets.count * 4 + items.count * 4 }
}
