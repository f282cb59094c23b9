import Foundation

/// Blocking waits — worker threads, a watchdog — and long computations run on a thread of their
/// own, so they do not hold one of Swift concurrency's cooperative threads (only two on a 2-core
/// machine) while every other test waits for one.
///
/// An expectation that fails on that thread has no test to belong to: Swift Testing reports it
/// under «unknown», with its file, line and message, and the run fails (checked: `swift test`
/// exits 1).
enum OffPool {
    static func run<T>(_ body: @escaping () throws -> T) async throws -> T {
        let box = UncheckedBox(body)
        return try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(with: Result { UncheckedBox(try box.value()) })
            }
        }.value
    }
}

/// Carries a value across the thread hop above; the caller hands it over and never shares it.
struct UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
