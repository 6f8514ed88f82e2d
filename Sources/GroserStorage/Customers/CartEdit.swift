/// A cart change decided by a rule, made in place: one line's quantity, a
/// line added at the end, a line removed, or every line removed. A shard
/// applies it to the cart where it is stored (no copy of the cart's lines),
/// keeps what `apply` returns to undo it, and logs it as the one line it
/// touched (`CartLineChange`), so a change costs one line whatever the cart holds.
public enum CartEdit: Sendable, Hashable {
    /// The line at the index takes this quantity (its seen price stays).
    case quantity(at: Int, UInt32)
    /// A line for a product the cart does not hold, at the end.
    case append(CartLineRecord)
    /// The line at the index goes.
    case remove(at: Int)
    /// Every line goes.
    case clear
}

/// What puts a cart back as it was before an edit (the version too).
public struct CartUndo: Sendable {
    public var version: UInt64
    public var step: Step
    public enum Step: Sendable {
        case quantity(at: Int, UInt32)
        case removeLast
        case insert(CartLineRecord, at: Int)
        case lines([CartLineRecord])
    }
    public init(version: UInt64, step: Step) {
        self.version = version
        self.step = step
    }
}

extension StoredCart {
    /// Makes `edit` in place and moves the version on by one; returns what
    /// undoes it. The edit must come from a rule that read this cart (an
    /// index within its lines).
    public mutating func apply(_ edit: consuming CartEdit) -> CartUndo {
        let undo: CartUndo.Step
        switch consume edit {
        case .quantity(let i, let q):
            undo = .quantity(at: i, lines[i].quantity)
            lines[i].quantity = q
        case .append(let line):
            lines.append(line)
            undo = .removeLast
        case .remove(let i):
            undo = .insert(lines.remove(at: i), at: i)
        case .clear:
            var old: [CartLineRecord] = []
            swap(&old, &lines)
            undo = .lines(old)
        }
        defer { version += 1 }
        return CartUndo(version: version, step: undo)
    }

    /// Puts the cart back as it was before the edit `undo` came from.
    public mutating func revert(_ undo: CartUndo) {
        version = undo.version
        switch undo.step {
        case .quantity(let i, let q): lines[i].quantity = q
        case .removeLast: lines.removeLast()
        case .insert(let line, let i): lines.insert(line, at: i)
        case .lines(let old): lines = old
        }
    }

    /// The log's line change for the edit just applied, read from what
    /// undoes it (what `apply` returned): nil for a clear, which is logged
    /// as the whole cart.
    public func lineChange(undoing undo: CartUndo) -> CartLineChange? {
        switch undo.step {
        case .quantity(let i, _): return CartLineChange(version: version, line: lines[i])
        case .removeLast: return CartLineChange(version: version, line: lines[lines.count - 1])
        case .insert(let gone, _):
            return CartLineChange(version: version, productUID: gone.productUID, quantity: 0, seenPriceMinorUnits: 0)
        case .lines: return nil
        }
    }
}
