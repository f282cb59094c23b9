public import Foundation

/// A ``LocalCacheTier`` that keeps tags with its values and removes every value carrying a tag
/// in one step (the disk tier, through an index table).
///
/// ``Storage/setValue(_:forKey:expiry:tags:tiers:)-(_,_,_,_,_)`` writes a tagged value to such
/// a tier and refuses to write one to a local tier that keeps no tags;
/// ``Storage/removeValues(taggedWith:tiers:)-(_,_)`` asks each one for the keys it removed.
///
/// Implementations must be thread-safe, and a write of a key must replace its tags with the
/// write's (none for an untagged write), so that removing a tag never removes a newer value
/// written without it.
public protocol TaggingCacheTier: LocalCacheTier {
    /// Stores `data` for `key` with `tags`, replacing any previous value and its tags.
    func setValue(
        _ data: Data, forKey key: String, expiry: Expiry?, metadata: Data?, isCompressible: Bool, tags: Set<String>
    ) throws

    /// Removes every value tagged `tag`, at once; returns their keys.
    @discardableResult
    func removeValues(taggedWith tag: String) throws -> [String]
}
