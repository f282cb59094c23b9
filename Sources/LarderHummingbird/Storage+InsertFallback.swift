#if Hummingbird
import Foundation
import Larder

// TEMPORARY until `Storage.insertValue` lands on main: atomic within this process only.
let pendingCreates = Locked<Set<String>>([])

extension Storage where Key == String, Value == Data {
    func insertValue(_ value: Data, forKey key: String, expiry: Expiry? = nil) async throws -> Bool {
        guard pendingCreates.withLock({ $0.insert(key).inserted }) else { return false }
        defer { _ = pendingCreates.withLock { $0.remove(key) } }
        if try await containsValue(forKey: key) { return false }
        try await setValue(value, forKey: key, expiry: expiry)
        return true
    }
}
#endif
