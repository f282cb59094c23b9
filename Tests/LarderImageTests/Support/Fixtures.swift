import Foundation
import LarderTestSupport
import LarderImage
import Testing

/// One committed image fixture and what its header says (see `Fixtures/make_fixtures.py`).
struct Fixture: CustomTestStringConvertible, Sendable {
    let name: String
    let format: ImageFormat
    /// `nil` for formats whose headers `ImageHeader.parse(_:)` does not read.
    let size: (width: Int, height: Int)?
    let frameCount: Int?
    /// The Exif orientation the header reports.
    var orientation = 1

    var testDescription: String { name }

    var data: Data {
        get throws {
            let url = try #require(Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures"))
            return try Data(contentsOf: url)
        }
    }

    /// Every fixture file; each still image is 5 x 3 pixels, each animation has 3 frames.
    static let all: [Fixture] = [
        Fixture(name: "image.png", format: .png, size: (5, 3), frameCount: 1),
        Fixture(name: "animated.png", format: .apng, size: (5, 3), frameCount: 3),
        Fixture(name: "image.gif", format: .gif, size: (5, 3), frameCount: 1),
        Fixture(name: "animated.gif", format: .gif, size: (5, 3), frameCount: 3),
        Fixture(name: "image.jpg", format: .jpeg, size: (5, 3), frameCount: 1),
        Fixture(name: "progressive.jpg", format: .jpeg, size: (5, 3), frameCount: 1),
        Fixture(name: "lossy.webp", format: .webp, size: (5, 3), frameCount: 1),
        Fixture(name: "lossless.webp", format: .webp, size: (5, 3), frameCount: 1),
        Fixture(name: "alpha.webp", format: .webp, size: (5, 3), frameCount: 1),
        Fixture(name: "animated.webp", format: .webp, size: (5, 3), frameCount: 3),
        Fixture(name: "image.bmp", format: .bmp, size: (5, 3), frameCount: 1),
        Fixture(name: "topdown.bmp", format: .bmp, size: (5, 3), frameCount: 1),
        Fixture(name: "image.tif", format: .tiff, size: (5, 3), frameCount: nil),
        Fixture(name: "bigendian.tif", format: .tiff, size: (5, 3), frameCount: nil),
        Fixture(name: "image.heic", format: .heic, size: (5, 3), frameCount: 1),
        Fixture(name: "image.avif", format: .avif, size: (5, 3), frameCount: 1),
        Fixture(name: "image.ico", format: .ico, size: (16, 16), frameCount: 1),
        Fixture(name: "multi.ico", format: .ico, size: (256, 256), frameCount: 1),
        Fixture(name: "image.cur", format: .cur, size: (32, 32), frameCount: 1),
        Fixture(name: "image.jp2", format: .jpeg2000, size: (5, 3), frameCount: nil),
        Fixture(name: "image.j2k", format: .jpeg2000, size: (5, 3), frameCount: nil),
        Fixture(name: "bigtiff.tif", format: .tiff, size: (5, 3), frameCount: nil),
        // Hand-made: an all-zero SizeHeader reads as 1 x 1.
        Fixture(name: "codestream.jxl", format: .jpegXL, size: (1, 1), frameCount: nil),
        Fixture(name: "container.jxl", format: .jpegXL, size: (1, 1), frameCount: nil),
        Fixture(name: "real.jxl", format: .jpegXL, size: (5, 3), frameCount: nil),
        Fixture(name: "real-container.jxl", format: .jpegXL, size: (5, 3), frameCount: nil),
    ] + (1...8).map { orientation in
        Fixture(name: "orientation-\(orientation).jpg", format: .jpeg, size: (5, 3), frameCount: 1, orientation: orientation)
    } + [
        Fixture(name: "orientation-6.webp", format: .webp, size: (5, 3), frameCount: 1, orientation: 6),
        Fixture(name: "document.pdf", format: .pdf, size: nil, frameCount: nil),
        Fixture(name: "image.svg", format: .svg, size: nil, frameCount: nil),
    ]

    /// The fixtures whose headers `ImageHeader.parse(_:)` reads.
    static var withHeaders: [Fixture] { all.filter { $0.size != nil } }
}

/// Every fuzz run mutates the same bytes for the same seed.
typealias SeededGenerator = SplitMix64

/// Builders for hand-made binary inputs.
enum Bytes {
    static func ascii(_ string: String) -> [UInt8] { Array(string.utf8) }
    static func be32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }
    static func le32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }
    static func be16(_ value: UInt16) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }
    static func le16(_ value: UInt16) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }

    /// An ISO BMFF box with a 32-bit size.
    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        be32(UInt32(8 + payload.count)) + ascii(type) + payload
    }

    /// An ISO BMFF full box (version and flags before the payload).
    static func fullBox(_ type: String, version: UInt8 = 0, flags: UInt32 = 0, _ payload: [UInt8]) -> [UInt8] {
        box(type, [version] + Array(be32(flags).dropFirst()) + payload)
    }

    static func ftyp(_ major: String, compatible: [String] = []) -> [UInt8] {
        box("ftyp", ascii(major) + be32(0) + compatible.flatMap(ascii))
    }

    static func ispe(_ width: UInt32, _ height: UInt32) -> [UInt8] {
        fullBox("ispe", be32(width) + be32(height))
    }

    /// A HEIF file: ftyp, then meta with pitm, and iprp holding ipco and an optional ipma.
    static func heif(brand: String = "heic", properties: [[UInt8]], primary: UInt16 = 1,
                     associations: [(item: UInt16, indices: [UInt8])] = []) -> Data {
        var ipma: [UInt8] = be32(UInt32(associations.count))
        for association in associations {
            ipma += be16(association.item) + [UInt8(association.indices.count)] + association.indices
        }
        let iprp = box("iprp", box("ipco", properties.flatMap { $0 }) + (associations.isEmpty ? [] : fullBox("ipma", ipma)))
        let meta = fullBox("meta", fullBox("pitm", be16(primary)) + iprp)
        return Data(ftyp(brand, compatible: ["mif1", brand]) + meta)
    }
}
