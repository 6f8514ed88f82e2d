import GroserWire

/// Finding the shelf a catalog request narrows to (ListProducts' and
/// SearchProducts' shelf_uid), or refusing it the one way both refuse.
extension RequestHandler {
    /// The place of the shelf `shelfUID` when it is one of `store`'s; nil
    /// with the refusal appended otherwise: NOT_FOUND when no shelf has the
    /// uid, INVALID_ARGUMENT when it is another store's. `storeShown` names
    /// `store` in that refusal (ListProducts shortens it as it does a
    /// client's string, SearchProducts does not).
    func location(ofShelf shelfUID: String, in store: StoreSegments, storeShown: String,
                  _ id: UInt64, _ out: inout [UInt8]) -> ShelfLocation? {
        guard let location = catalog.location(ofShelf: shelfUID) else {
            fail(id, .notFound, "No shelf has the uid \"\(printable(shelfUID))\".", &out)
            return nil
        }
        guard location.storeUID == store.uid else {
            fail(id, .invalidArgument, "The shelf \(printable(shelfUID)) belongs to store \(location.storeUID), not to \(storeShown).", &out)
            return nil
        }
        return location
    }
}
