/// What a reliability check found: each broken promise as one line, sorted into the kinds the
/// long-run report counts. The tests record every violation as an issue; `larder-torture` counts
/// them and exits non-zero if there is any.
public struct Findings: Sendable {
    /// The kind of a broken promise.
    public enum Kind: String, Sendable, CaseIterable {
        /// A read returned damaged, truncated or another key's bytes, or a generation that was
        /// never allowed (promise 1).
        case wrongBytes = "wrong bytes"
        /// A write logged as completed (durable, no evictions) was missing or older (promise 2).
        case lostWrite = "lost completed write"
        /// A key appeared that nobody wrote.
        case unexpectedKey = "unexpected key"
        /// Totals differ from a recount or exceed the limits (promise 5).
        case totals = "totals or limits"
        /// The store stopped working, failed to open, or threw where it must not (promise 3).
        case broken = "store broken"
        /// A helper process misbehaved (exited before its kill, failed its own checks).
        case helper = "helper failure"
    }

    public struct Violation: Sendable, CustomStringConvertible {
        public var kind: Kind
        public var message: String
        public var description: String { "[\(kind.rawValue)] \(message)" }
    }

    public private(set) var violations: [Violation] = []
    /// Keys (or values) read and compared against what they must be.
    public var keysChecked = 0

    public init() {}

    public var isEmpty: Bool { violations.isEmpty }

    public mutating func record(_ kind: Kind, _ message: String) {
        violations.append(Violation(kind: kind, message: message))
    }

    /// Records a violation of `kind` unless `condition` holds.
    public mutating func check(_ condition: Bool, _ kind: Kind, _ message: @autoclosure () -> String) {
        if !condition { record(kind, message()) }
    }

    public func count(_ kind: Kind) -> Int { violations.count { $0.kind == kind } }

    public mutating func merge(_ other: Findings) {
        violations += other.violations
        keysChecked += other.keysChecked
    }
}
