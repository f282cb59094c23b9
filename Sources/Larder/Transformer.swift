public import Foundation

/// Turns values into bytes for the disk tier and back.
///
/// The memory tier keeps values as they are; only the disk tier sees the encoded bytes. A
/// decoding failure on read is a miss that removes the bad entry.
///
/// ```swift
/// struct Profile: Codable { var name: String; var tags: [String] }
/// let storage = try Storage<String, Profile>(transformer: .json())
///
/// let upper = Transformer<String>(
///     encode: { Data($0.utf8) },
///     decode: { String(decoding: $0, as: UTF8.self) })
/// ```
public struct Transformer<Value>: Sendable {
    /// Encodes a value to bytes. Throw to refuse a value.
    public var encode: @Sendable (Value) throws -> Data
    /// Decodes bytes written by ``encode``. Throw for bytes that are not a valid value.
    public var decode: @Sendable (Data) throws -> Value
    /// Whether gzip may help (`false` for already-compressed formats). Defaults to `true`.
    public var isCompressible: Bool
    /// Decides per value whether gzip may help, in place of ``isCompressible``, for values whose
    /// encoding depends on their content (a PNG is already compressed, an SVG is not).
    /// Called once per disk write, outside any lock. Defaults to `nil`: ``isCompressible``
    /// applies to every value.
    ///
    /// ```swift
    /// var transformer = Transformer<Data>.data
    /// transformer.isValueCompressible = { !$0.starts(with: [0x89, 0x50, 0x4E, 0x47]) } // not PNG
    /// ```
    public var isValueCompressible: (@Sendable (Value) -> Bool)?

    /// Creates a transformer from two closures.
    public init(
        encode: @escaping @Sendable (Value) throws -> Data,
        decode: @escaping @Sendable (Data) throws -> Value,
        isCompressible: Bool = true
    ) {
        self.encode = encode
        self.decode = decode
        self.isCompressible = isCompressible
    }

    /// Whether gzip may help for `value`: ``isValueCompressible`` when set, else ``isCompressible``.
    func isCompressible(_ value: Value) -> Bool {
        isValueCompressible?(value) ?? isCompressible
    }
}

extension Transformer where Value == Data {
    /// Bytes as they are.
    public static var data: Transformer<Data> {
        Transformer(encode: { $0 }, decode: { $0 })
    }
}

extension Transformer where Value == String {
    /// UTF-8 text. Bytes that are not valid UTF-8 fail to decode.
    public static var string: Transformer<String> {
        Transformer(
            encode: { Data($0.utf8) },
            decode: { data in
                guard let string = String(data: data, encoding: .utf8) else {
                    throw StorageError.decoding("\(data.count) bytes are not valid UTF-8")
                }
                return string
            })
    }
}

extension Transformer where Value: Codable & Sendable {
    /// JSON through `JSONEncoder` and `JSONDecoder`, each made by the given factory per call
    /// (Foundation's coders are not thread-safe to share).
    ///
    /// - Parameters:
    ///   - makeEncoder: Makes the encoder; configure date and key strategies here.
    ///   - makeDecoder: Makes the matching decoder.
    public static func json(
        encoder makeEncoder: @escaping @Sendable () -> JSONEncoder = { JSONEncoder() },
        decoder makeDecoder: @escaping @Sendable () -> JSONDecoder = { JSONDecoder() }
    ) -> Transformer<Value> {
        makeJSONTransformer(makeEncoder, makeDecoder)
    }
}

private func makeJSONTransformer<Value: Codable & Sendable>(
    _ makeEncoder: @escaping @Sendable () -> JSONEncoder, _ makeDecoder: @escaping @Sendable () -> JSONDecoder
) -> Transformer<Value> {
    Transformer(
        encode: { value in try encodeJSON(value, with: makeEncoder()) },
        decode: { data in try decodeJSON(data, with: makeDecoder()) })
}

private func encodeJSON<Value: Encodable>(_ value: Value, with encoder: JSONEncoder) throws -> Data {
    do { return try encoder.encode(value) } catch {
        throw StorageError.wrappingEncoding(error)
    }
}

private func decodeJSON<Value: Decodable>(_ data: Data, with decoder: JSONDecoder) throws -> Value {
    do { return try decoder.decode(Value.self, from: data) } catch {
        throw StorageError.wrappingDecoding(error)
    }
}
