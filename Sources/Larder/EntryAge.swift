/// Which moment of an entry's life a trim by age compares with its date.
///
/// ```swift
/// // Drop what nobody has read for a week, and anything written before the last deploy.
/// try storage.trim(toDate: Date().addingTimeInterval(-7 * 86_400), by: .lastUsed)
/// try storage.trim(toDate: deployDate, by: .written)
/// ```
public enum EntryAge: Sendable, Hashable {
    /// When the entry was last written.
    case written
    /// When the entry was last written or read, whichever is later (PINCache's `trimToDate`).
    case lastUsed
}
