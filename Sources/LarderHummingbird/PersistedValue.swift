#if Hummingbird
public import Foundation
public import Larder

/// A value as ``LarderPersistDriver`` keeps it: the JSON the disk tier stores, and the object it
/// was made from (or last decoded as), which a memory hit returns without decoding JSON again.
///
/// Reading a value as another type than the one it holds decodes its JSON as that type, exactly
/// as if only the JSON were kept; the decoded object then replaces the held one.
public struct PersistedValue: Sendable, CacheCostMeasurable {
    /// The value's JSON encoding, as stored on disk.
    public let json: Data
    /// The object last made or decoded, shared by the value's copies.
    let decoded: Locked<(any Sendable)?>

    /// A value read back from its JSON; the first read as a type decodes it.
    public init(json: Data) {
        self.json = json
        self.decoded = Locked(nil)
    }

    /// A value made from `object`, encoded once as JSON for the tiers below memory.
    init(object: some Encodable & Sendable, json: Data) {
        self.json = json
        self.decoded = Locked(object)
    }

    /// The bytes of its JSON: the memory tier's cost.
    public var cacheCost: Int { json.count }

    /// The value as an `Object`: the held object when it is one, otherwise its JSON decoded.
    ///
    /// - Throws: `DecodingError` when the JSON is not an `Object`.
    func object<Object: Decodable & Sendable>(as type: Object.Type) throws -> Object {
        if let object = decoded.withLock({ $0 }) as? Object { return object }
        let object = try JSONDecoder().decode(type, from: json)
        decoded.withLock { $0 = object }
        return object
    }

    /// The transformer between the disk tier's bytes and values.
    public static var transformer: Transformer<PersistedValue> {
        Transformer(encode: { $0.json }, decode: { PersistedValue(json: $0) })
    }
}
#endif
