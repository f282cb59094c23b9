#if Redis
/// Redis Cluster's placement of a key: CRC16 (XMODEM) of the key, or of its **hash tag**, modulo
/// 16384.
///
/// The hash tag is the part between the first `{` and the first `}` after it, when that part is
/// not empty; otherwise the whole key is hashed. Every key a ``RedisStore`` writes for one cache
/// key (the value, its lock key, its stale copy) carries the same tag, so they share a slot.
///
/// Related documentation: <https://redis.io/docs/latest/operate/oss_and_stack/reference/cluster-spec/#key-distribution-model>
enum HashSlot {
    /// Slots in a cluster.
    static let count = 16_384

    /// The slot of `key` (a wire key's bytes).
    static func of(_ key: some Collection<UInt8>) -> Int {
        Int(crc16(hashedPart(of: key)) & UInt16(count - 1))
    }

    /// The bytes the slot is computed from: the hash tag, or the whole key.
    static func hashedPart<Key: Collection<UInt8>>(of key: Key) -> Key.SubSequence {
        if let open = key.firstIndex(of: UInt8(ascii: "{")) {
            let afterOpen = key.index(after: open)
            if let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen {
                return key[afterOpen..<close]
            }
        }
        return key[...]
    }

    /// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection, as the cluster
    /// specification defines it (`CRC16("123456789") == 0x31C3`).
    static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    private static let table: [UInt16] = (0..<256).map { index in
        var crc = UInt16(index) << 8
        for _ in 0..<8 {
            crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
        }
        return crc
    }
}
#endif
