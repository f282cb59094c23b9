import Larder
import Synchronization

/// The counters behind ``ImageCacheStatistics``, lock-free.
final class ImageCacheCounters: Sendable {
    let memoryHits = Atomic<Int>(0)
    let processed = Atomic<Int>(0)
    let downloaded = Atomic<Int>(0)
    let downloads = Atomic<Int>(0)
    let failures = Atomic<Int>(0)
    let revalidated = Atomic<Int>(0)
    let staleWhileRevalidate = Atomic<Int>(0)
    let staleIfError = Atomic<Int>(0)
    let revalidations = Atomic<Int>(0)
    private let tierHits = Locked<[String: Int]>([:])

    func countDownload() { downloads.add(1, ordering: .relaxed) }
    func countRevalidation() { revalidations.add(1, ordering: .relaxed) }
    func countFailure() { failures.add(1, ordering: .relaxed) }

    /// Counts one answered request: by its freshness when it was not simply fresh, else by
    /// where it came from.
    func count(_ result: ImageResult) {
        switch result.freshness {
        case .revalidated: revalidated.add(1, ordering: .relaxed)
        case .staleWhileRevalidate: staleWhileRevalidate.add(1, ordering: .relaxed)
        case .staleIfError: staleIfError.add(1, ordering: .relaxed)
        default: count(result.source)
        }
    }

    /// Counts one fresh answer by where it came from.
    func count(_ source: ImageResult.Source) {
        switch source {
        case .memory: memoryHits.add(1, ordering: .relaxed)
        case .processed: processed.add(1, ordering: .relaxed)
        case .network: downloaded.add(1, ordering: .relaxed)
        default: tierHits.withLock { $0[source.name, default: 0] += 1 }
        }
    }

    var snapshot: ImageCacheStatistics {
        var statistics = ImageCacheStatistics()
        statistics.memoryHits = memoryHits.load(ordering: .relaxed)
        statistics.tierHits = tierHits.withLock { $0 }
        statistics.processed = processed.load(ordering: .relaxed)
        statistics.downloaded = downloaded.load(ordering: .relaxed)
        statistics.downloads = downloads.load(ordering: .relaxed)
        statistics.failures = failures.load(ordering: .relaxed)
        statistics.revalidated = revalidated.load(ordering: .relaxed)
        statistics.staleWhileRevalidate = staleWhileRevalidate.load(ordering: .relaxed)
        statistics.staleIfError = staleIfError.load(ordering: .relaxed)
        statistics.revalidations = revalidations.load(ordering: .relaxed)
        return statistics
    }
}
