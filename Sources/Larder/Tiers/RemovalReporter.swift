/// Where a tier that a ``Storage`` created reports the entries it evicts, or finds expired, so
/// the storage's events can carry them. The tier asks ``isActive`` first and keeps no keys
/// while no one listens.
@usableFromInline
final class RemovalReporter<Key>: Sendable {
    @usableFromInline let isActive: @Sendable () -> Bool
    @usableFromInline let report: @Sendable (_ key: Key, _ kind: StorageEvent.Kind) -> Void

    init(isActive: @escaping @Sendable () -> Bool, report: @escaping @Sendable (Key, StorageEvent.Kind) -> Void) {
        self.isActive = isActive
        self.report = report
    }
}
