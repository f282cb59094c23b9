#if Hummingbird
public import Foundation
public import Larder
import Synchronization

/// A value as ``LarderPersistDriver`` keeps it: the JSON the disk tier stores, and the object it
/// was made from (or first decoded as), which a memory hit returns without decoding JSON again.
///
/// Reading a value as another type than the one it holds decodes its JSON as that type, exactly
/// as if only the JSON were kept (and keeps the held object).
public struct PersistedValue: Sendable, CacheCostMeasurable {
    /// The value's JSON encoding, as stored on disk.
    public let json: Data
    /// The object it was made from, or first decoded as, shared by the value's copies: set
    /// once, then read without a lock by every hit.
    let decoded: DecodedObject

    /// A value read back from its JSON; the first read as a type decodes it.
    public init(json: Data) {
        self.json = json
        self.decoded = DecodedObject()
    }

    /// A value made from `object`, encoded once as JSON for the tiers below memory.
    init(object: some Encodable & Sendable, json: Data) {
        self.json = json
        self.decoded = DecodedObject()
        _ = decoded.reference.storeIfNil(DecodedObject.Box(object))
    }

    /// The bytes of its JSON: the memory tier's cost.
    public var cacheCost: Int { json.count }

    /// The value as an `Object`: the held object when it is one, otherwise its JSON decoded.
    ///
    /// - Throws: `DecodingError` when the JSON is not an `Object`.
    func object<Object: Decodable & Sendable>(as type: Object.Type) throws -> Object {
        let held = decoded.reference.load()
        if let object = held?.object as? Object { return object }
        let object = try JSONDecoder().decode(type, from: json)
        if held == nil { _ = decoded.reference.storeIfNil(DecodedObject.Box(object)) }
        return object
    }

    /// The transformer between the disk tier's bytes and values.
    public static var transformer: Transformer<PersistedValue> {
        Transformer(encode: { $0.json }, decode: { PersistedValue(json: $0) })
    }
}

/// The slot for a ``PersistedValue``'s object: filled at most once, read without a lock.
final class DecodedObject: Sendable {
    final class Box: Sendable {
        let object: any Sendable
        init(_ object: any Sendable) { self.object = object }
    }

    let reference = AtomicLazyReference<Box>()
}
#endif
