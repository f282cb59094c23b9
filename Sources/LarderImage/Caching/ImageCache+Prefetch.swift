public import Foundation
import Larder
import Larder

extension ImageCache {
    /// The prefetch batches in flight.
    struct PrefetchBatches {
        var tasks: [UInt64: Task<PrefetchSummary, Never>] = [:]
        var nextID: UInt64 = 0
    }

    /// Loads `keys` into the cache in the background, at most
    /// ``Configuration/maximumConcurrentPrefetches`` at a time across all batches, skipping keys
    /// already cached.
    ///
    /// A prefetch is an ordinary waiter of the shared per-key load: a later
    /// ``image(for:fetch:)-(_,(ImageKey)->Data)`` for a key being prefetched joins it instead
    /// of fetching again, and still gets the image if the prefetch is cancelled. Errors are
    /// counted, not thrown.
    ///
    /// ```swift
    /// cache.prefetch(visibleKeys) { try await download($0) }         // fire and forget
    /// let summary = await cache.prefetch(nextPage) { try await download($0) }.value
    /// ```
    ///
    /// - Parameters:
    ///   - keys: The images to load, started in order.
    ///   - fetch: Downloads a key's bytes, as in ``image(for:fetch:)-(_,(ImageKey)->Data)``.
    /// - Returns: The batch's task: await its value for the summary, or cancel it to stop this
    ///   batch alone. It runs at `.utility` priority.
    @discardableResult
    public func prefetch(
        _ keys: [ImageKey], fetch: @escaping @Sendable (ImageKey) async throws -> Data
    ) -> Task<PrefetchSummary, Never> {
        startPrefetching(keys, from: .closure { FetchedBytes(data: try await fetch($0)) })
    }

    /// Loads `keys` into the cache in the background with a fetch closure that returns the
    /// HTTP validators too; see ``prefetch(_:fetch:)-(_,(ImageKey)->Data)``.
    @discardableResult
    public func prefetch(
        _ keys: [ImageKey], fetch: @escaping @Sendable (ImageKey) async throws -> FetchedImage
    ) -> Task<PrefetchSummary, Never> {
        startPrefetching(keys, from: .closure { key in
            let fetched = try await fetch(key)
            return FetchedBytes(fetched)
        })
    }

    /// Loads `keys` into the cache in the background with the cache's ``fetcher``, at
    /// ``FetchPriority/low``, so images requested for display go first; see
    /// ``prefetch(_:fetch:)-(_,(ImageKey)->Data)``.
    @discardableResult
    public func prefetch(_ keys: [ImageKey]) -> Task<PrefetchSummary, Never> {
        startPrefetching(keys, from: fetcher.map { .fetcher($0, FetchOptions(priority: .low)) } ?? .none)
    }

    /// Cancels every prefetch batch in flight.
    ///
    /// Keys not yet started are left alone; loads in progress lose the prefetch as a waiter,
    /// so their fetch is cancelled unless an ``image(for:fetch:)-(_,(ImageKey)->Data)`` call
    /// is also waiting for it.
    public func cancelPrefetching() {
        let batches = prefetches.withLock { state in
            defer { state.tasks.removeAll() }
            return Array(state.tasks.values)
        }
        for batch in batches { batch.cancel() }
    }

    private func startPrefetching(_ keys: [ImageKey], from source: FetchSource) -> Task<PrefetchSummary, Never> {
        prefetches.withLock { state in
            state.nextID += 1
            let id = state.nextID
            // Created under the lock, so the batch cannot remove itself before it is recorded.
            let task = Task(priority: .utility) {
                let summary = await self.runPrefetch(keys, from: source)
                self.prefetches.withLock { _ = $0.tasks.removeValue(forKey: id) }
                return summary
            }
            state.tasks[id] = task
            return task
        }
    }

    private func runPrefetch(_ keys: [ImageKey], from source: FetchSource) async -> PrefetchSummary {
        var summary = PrefetchSummary()
        await withTaskGroup(of: Bool?.self) { group in
            for key in keys {
                if Task.isCancelled { break }
                if (try? await storage.containsValue(forKey: key)) == true {
                    summary.skipped += 1
                    continue
                }
                // Waits for a free slot; throws once the batch is cancelled.
                do { try await prefetchPermits.acquire() } catch { break }
                group.addTask {
                    let loaded: Bool?
                    do {
                        _ = try await self.load(key, from: source)
                        loaded = true
                    } catch {
                        loaded = Task.isCancelled ? nil : false
                    }
                    await self.prefetchPermits.release()
                    return loaded
                }
            }
            for await outcome in group {
                switch outcome {
                case true?: summary.loaded += 1
                case false?: summary.failed += 1
                case nil: break
                }
            }
        }
        summary.cancelled = keys.count - summary.loaded - summary.skipped - summary.failed
        return summary
    }
}
