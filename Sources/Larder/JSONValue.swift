public import Foundation
import Synchronization

/// A value stored as JSON that keeps the object it was made from, so that a memory hit returns
/// that object without decoding the JSON again.
///
/// The tiers below memory store ``json`` (``Transformer/jsonValue``); a value read back from
/// them decodes its JSON on its first read as a type and keeps the result for later reads.
/// Reading a value as another type than the one it holds decodes the JSON as that type, exactly
/// as if only the JSON were kept. The server adapters (Vapor's cache, Hummingbird's persist
/// driver) store their values this way, since their callers name the type at every read.
///
/// ```swift
/// let storage = try Storage<String, JSONValue>(transformer: .jsonValue) { $0.directory = url }
/// try storage.setValue(JSONValue(encoding: user), forKey: "user/42")
/// let user = try storage.value(forKey: "user/42")?.decoded(as: User.self)
/// ```
public struct JSONValue: Sendable, CacheCostMeasurable {
    /// The value's JSON encoding, as the tiers below memory store it.
    public let json: Data
    /// The object it was made from, or first decoded as, shared by the value's copies: set
    /// once, then read without a lock by every hit.
    let held: HeldObject

    /// A value read back from its JSON; its first read as a type decodes it.
    public init(json: Data) {
        self.json = json
        self.held = HeldObject()
    }

    /// A value made from `object`, encoded once as JSON, that keeps `object` for reads as its
    /// own type.
    ///
    /// - Throws: ``StorageError`` with code `encoding` when `encoder` cannot encode `object`.
    public init<Object: Encodable & Sendable>(encoding object: Object, encoder: JSONEncoder = JSONEncoder()) throws {
        do {
            self.json = try encoder.encode(object)
        } catch {
            throw StorageError.encoding("cannot encode \(Object.self) as JSON", cause: error)
        }
        self.held = HeldObject()
        _ = held.reference.storeIfNil(HeldObject.Box(object))
    }

    /// The bytes of its JSON: the memory tier's cost.
    public var cacheCost: Int { json.count }

    /// The value as an `Object`: the held object when it is one, otherwise its JSON decoded
    /// by `decoder` (the first such decode is kept when the value held nothing yet).
    ///
    /// - Throws: ``StorageError`` with code `decoding` when the JSON is not an `Object`.
    public func decoded<Object: Decodable & Sendable>(
        as type: Object.Type, decoder: JSONDecoder = JSONDecoder()
    ) throws -> Object {
        let box = held.reference.load()
        if let object = box?.object as? Object { return object }
        let object: Object
        do {
            object = try decoder.decode(type, from: json)
        } catch {
            throw StorageError.decoding("\(json.count) bytes of JSON are not a \(Object.self)", cause: error)
        }
        if box == nil { _ = held.reference.storeIfNil(HeldObject.Box(object)) }
        return object
    }
}

extension Transformer where Value == JSONValue {
    /// A ``JSONValue``'s JSON as the bytes the tiers below memory store.
    public static var jsonValue: Transformer<JSONValue> {
        Transformer(encode: { $0.json }, decode: { JSONValue(json: $0) })
    }
}

/// The slot for a ``JSONValue``'s object: filled at most once, read without a lock.
final class HeldObject: Sendable {
    final class Box: Sendable {
        let object: any Sendable
        init(_ object: any Sendable) { self.object = object }
    }

    let reference = AtomicLazyReference<Box>()
}
