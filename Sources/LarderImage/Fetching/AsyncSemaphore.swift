/// A counting semaphore for tasks: ``acquire()`` suspends (never blocks a thread) until a permit
/// is free, and a cancelled waiter leaves the queue with `CancellationError`.
actor AsyncSemaphore {
    private var permits: Int
    private var waiters: [(id: UInt64, priority: Int, continuation: CheckedContinuation<Void, any Error>)] = []
    private var nextID: UInt64 = 0

    init(permits: Int) {
        precondition(permits > 0, "a semaphore needs at least one permit")
        self.permits = permits
    }

    /// Takes a permit, waiting for one to be released: waiters are served by `priority`
    /// (higher first), then in arrival order.
    ///
    /// - Throws: `CancellationError` when the task is cancelled before it gets a permit.
    func acquire(priority: Int = 0) async throws {
        try Task.checkCancellation()
        if permits > 0 {
            permits -= 1
            return
        }
        let id = nextID
        nextID += 1
        try await withTaskCancellationHandler {
            // Runs on the actor before it suspends, so the waiter is queued before the
            // cancellation handler's hop to the actor can look for it.
            try await withCheckedThrowingContinuation { continuation in
                // Behind every waiter of the same or a higher priority.
                let position = waiters.firstIndex { $0.priority < priority } ?? waiters.endIndex
                waiters.insert((id, priority, continuation), at: position)
            }
        } onCancel: {
            Task { await self.cancelWaiter(id) }
        }
    }

    /// How many tasks wait for a permit.
    var waiterCount: Int { waiters.count }

    /// Returns a permit, handing it straight to the first waiter (highest priority, then
    /// longest waiting) if there is one.
    func release() {
        if waiters.isEmpty {
            permits += 1
        } else {
            waiters.removeFirst().continuation.resume()
        }
    }

    private func cancelWaiter(_ id: UInt64) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return } // already has a permit
        waiters.remove(at: index).continuation.resume(throwing: CancellationError())
    }
}
