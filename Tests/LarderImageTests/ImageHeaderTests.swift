import Foundation
import LarderTestSupport
@testable import LarderImage
import Testing

@Suite(.timeLimit(.minutes(10)))
struct ImageHeaderTests {
    // MARK: - Fixtures

    @Test(arguments: Fixture.withHeaders)
    func readsPixelSizeAndFrameCountOfEveryFixture(_ fixture: Fixture) throws {
        let header = try #require(ImageHeader.parse(try fixture.data))
        #expect(header.format == fixture.format)
        #expect(header.pixelWidth == fixture.size?.width)
        #expect(header.pixelHeight == fixture.size?.height)
        #expect(header.frameCount == fixture.frameCount)
        #expect(header.isAnimated == ((fixture.frameCount ?? 1) > 1))
        // Orientations 5-8 (from real Exif written by Pillow) turn the 5 x 3 image to 3 x 5
        #expect(header.orientation == fixture.orientation)
        let turned = fixture.orientation >= 5
        #expect(header.orientedPixelWidth == (turned ? fixture.size?.height : fixture.size?.width))
        #expect(header.orientedPixelHeight == (turned ? fixture.size?.width : fixture.size?.height))
    }

    @Test func aPNGEntryOfAnIconIsSizedFromItsOwnHeaderAndZeroBytesMean256() throws {
        // multi.ico holds 16 x 16, 48 x 32 and 256 x 256 (stored as PNG with 0 size bytes)
        let data = try #require(Fixture.all.first { $0.name == "multi.ico" }).data
        #expect(data[6 + 16 * 2] == 0 && data[6 + 16 * 2 + 1] == 0)
        let header = try #require(ImageHeader.parse(data))
        #expect((header.pixelWidth, header.pixelHeight) == (256, 256))
    }

    @Test(arguments: Fixture.all.filter { $0.size == nil })
    func returnsNilForFormatsWhoseHeadersItDoesNotRead(_ fixture: Fixture) throws {
        #expect(ImageFormat.detect(try fixture.data) != nil)
        #expect(ImageHeader.parse(try fixture.data) == nil)
    }

    @Test(arguments: Fixture.withHeaders)
    func answersEveryPrefixWithNilOrTheFullFilesSizeAndNoWrongFrameCount(_ fixture: Fixture) throws {
        let data = try fixture.data
        var answered = 0
        for length in 0..<data.count {
            guard let header = ImageHeader.parse(data.prefix(length)) else { continue }
            answered += 1
            #expect(header.format == ImageFormat.detect(data.prefix(length)))
            #expect(header.pixelWidth == fixture.size?.width, "prefix \(length)")
            #expect(header.pixelHeight == fixture.size?.height, "prefix \(length)")
            #expect(header.frameCount == nil || header.frameCount == fixture.frameCount, "prefix \(length)")
        }
        // Headers sit at the front: most prefixes past them already answer (HEIF's meta box is
        // the exception only when it comes after the media data, which these files do not do).
        #expect(answered > 0)
    }

    @Test(arguments: Fixture.all)
    func survivesThousandsOfRandomByteMutations(_ fixture: Fixture) throws {
        // Given a seeded generator, so a failure reproduces
        var generator = SeededGenerator(seed: UInt64(fixture.name.utf8.reduce(0) { $0 &* 31 &+ UInt64($1) }))
        let original = [UInt8](try fixture.data)
        var parsed = 0
        for _ in 0..<2_000 {
            // When 1 to 8 random bytes are overwritten, sometimes with a hostile value
            var bytes = original
            for _ in 0..<Int.random(in: 1...8, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                bytes[index] = [0x00, 0xFF, 0x01, 0x7F, UInt8.random(in: 0...255, using: &generator)]
                    .randomElement(using: &generator)!
            }
            // Then parsing never crashes, and any answer is self-consistent
            let data = Data(bytes)
            if let header = ImageHeader.parse(data) {
                parsed += 1
                #expect(header.format == ImageFormat.detect(data))
                #expect(header.pixelWidth > 0 && header.pixelHeight > 0)
                #expect(header.frameCount.map { $0 > 0 } ?? true)
                #expect(header.estimatedDecodedCost >= 4)
            }
        }
        if fixture.size != nil { #expect(parsed > 0, "mutations should leave some headers intact") }
    }

    // MARK: - Decoded cost

    @Test
    func estimatesDecodedCostAsFourBytesPerPixelPerFrame() {
        #expect(ImageHeader(format: .png, pixelWidth: 640, pixelHeight: 480).estimatedDecodedCost == 640 * 480 * 4)
        #expect(ImageHeader(format: .gif, pixelWidth: 10, pixelHeight: 10, frameCount: 3).estimatedDecodedCost == 1_200)
        #expect(ImageHeader(format: .tiff, pixelWidth: 10, pixelHeight: 10, frameCount: nil).estimatedDecodedCost == 400)
    }

    @Test
    func saturatesDecodedCostInsteadOfOverflowing() throws {
        // Given a BMP that claims Int32.max x |Int32.min| pixels
        var bytes = Bytes.ascii("BM") + [UInt8](repeating: 0, count: 12) + Bytes.le32(40)
        bytes += Bytes.le32(UInt32(Int32.max)) + Bytes.le32(UInt32(bitPattern: Int32.min))
        let header = try #require(ImageHeader.parse(Data(bytes)))
        #expect(header.pixelWidth == Int(Int32.max))
        #expect(header.pixelHeight == 1 << 31)
        #expect(header.estimatedDecodedCost == Int.max)
        let huge = ImageHeader(format: .gif, pixelWidth: .max, pixelHeight: 2, frameCount: .max)
        #expect(huge.estimatedDecodedCost == Int.max)
    }

    // MARK: - Format details

    @Test
    func readsAtopDownBitmapsNegativeHeightAsItsMagnitude() throws {
        let bytes = Bytes.ascii("BM") + [UInt8](repeating: 0, count: 12) + Bytes.le32(40) + Bytes.le32(7)
            + Bytes.le32(UInt32(bitPattern: -9))
        let header = try #require(ImageHeader.parse(Data(bytes)))
        #expect((header.pixelWidth, header.pixelHeight) == (7, 9))
    }

    @Test
    func readsAnOS2BitmapCoreHeaderWith16BitSizes() throws {
        let bytes = Bytes.ascii("BM") + [UInt8](repeating: 0, count: 12) + Bytes.le32(12) + Bytes.le16(300) + Bytes.le16(200)
        let header = try #require(ImageHeader.parse(Data(bytes)))
        #expect((header.pixelWidth, header.pixelHeight) == (300, 200))
    }

    @Test(arguments: [true, false])
    func readsTIFFSizesStoredAsShortOrLongInEitherByteOrder(_ bigEndian: Bool) throws {
        func u16(_ value: UInt16) -> [UInt8] { bigEndian ? Bytes.be16(value) : Bytes.le16(value) }
        func u32(_ value: UInt32) -> [UInt8] { bigEndian ? Bytes.be32(value) : Bytes.le32(value) }
        // Given IFD0 with a LONG ImageWidth of 70000 and a SHORT ImageLength of 3, after another tag
        var bytes = Bytes.ascii(bigEndian ? "MM" : "II") + u16(42) + u32(8) + u16(3)
        bytes += u16(254) + u16(4) + u32(1) + u32(0)
        bytes += u16(256) + u16(4) + u32(1) + u32(70_000)
        bytes += u16(257) + u16(3) + u32(1) + u16(3) + u16(0)
        bytes += u32(0)
        let header = try #require(ImageHeader.parse(Data(bytes)))
        #expect((header.pixelWidth, header.pixelHeight) == (70_000, 3))
    }

    @Test
    func readsTheHEIFPrimaryItemsSizeRatherThanAThumbnail() throws {
        // Given a 64x48 primary image (item 1, property 2) and a larger 320x240 property of item 2
        let data = Bytes.heif(properties: [Bytes.box("hvcC", [1, 2, 3]), Bytes.ispe(64, 48), Bytes.ispe(320, 240)],
                              associations: [(item: 2, indices: [0x83]), (item: 1, indices: [0x81, 2])])
        let header = try #require(ImageHeader.parse(data))
        #expect(header.format == .heic)
        #expect((header.pixelWidth, header.pixelHeight) == (64, 48))
    }

    @Test
    func appliesTheHEIFCleanApertureAndRotationOfThePrimaryItem() throws {
        // Given a 64x64 coded image cropped to 5x3 (clap), then rotated by 90 degrees (irot)
        let clap = Bytes.box("clap", [5, 1, 3, 1, 0, 0, 0, 0].flatMap { Bytes.be32($0) })
        let irot = Bytes.box("irot", [1])
        let data = Bytes.heif(properties: [Bytes.ispe(64, 64), clap, irot],
                              associations: [(item: 1, indices: [1, 0x82, 0x83])])
        let header = try #require(ImageHeader.parse(data))
        #expect((header.pixelWidth, header.pixelHeight) == (3, 5))
        // And a clean aperture larger than the coded image is rejected
        let tooWide = Bytes.box("clap", [65, 1, 3, 1, 0, 0, 0, 0].flatMap { Bytes.be32($0) })
        #expect(ImageHeader.parse(Bytes.heif(properties: [Bytes.ispe(64, 64), tooWide],
                                             associations: [(item: 1, indices: [1, 2])])) == nil)
    }

    @Test
    func fallsBackToTheLargestHEIFExtentsWithoutAssociations() throws {
        let data = Bytes.heif(brand: "avif", properties: [Bytes.ispe(16, 16), Bytes.ispe(200, 100)])
        let header = try #require(ImageHeader.parse(data))
        #expect(header.format == .avif)
        #expect((header.pixelWidth, header.pixelHeight) == (200, 100))
    }

    @Test
    func readsA64BitLargesizeBoxWhenItFits() throws {
        // Given a meta box written with size 1 and a 64-bit largesize
        let ipco = Bytes.box("iprp", Bytes.box("ipco", Bytes.ispe(9, 4)))
        let payload: [UInt8] = [0, 0, 0, 0] + ipco
        let meta = Bytes.be32(1) + Bytes.ascii("meta") + [0, 0, 0, 0] + Bytes.be32(UInt32(16 + payload.count)) + payload
        let header = try #require(ImageHeader.parse(Data(Bytes.ftyp("heic") + meta)))
        #expect((header.pixelWidth, header.pixelHeight) == (9, 4))
    }

    @Test
    func countsAPNGFramesFromACTLAndRejectsZeroFrames() throws {
        let apng = try Fixture.all.first { $0.name == "animated.png" }!.data
        let acTL = try #require(apng.range(of: Data("acTL".utf8)))
        var edited = apng
        edited.replaceSubrange(acTL.upperBound..<acTL.upperBound + 4, with: Bytes.be32(7))
        #expect(ImageHeader.parse(edited)?.frameCount == 7)
        edited.replaceSubrange(acTL.upperBound..<acTL.upperBound + 4, with: Bytes.be32(0))
        #expect(ImageHeader.parse(edited) == nil)
    }

    @Test
    func readsJPEGSizeAfterFillBytesAndRestartMarkers() throws {
        // Given SOI, fill bytes, an RST marker, a COM segment, then SOF0 for 640 x 480
        let bytes: [UInt8] = [0xFF, 0xD8, 0xFF, 0xFE, 0x00, 0x04, 0x41, 0x42, 0xFF, 0xFF, 0xFF, 0xD0,
                              0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01, 0xE0, 0x02, 0x80, 0x03]
        let header = try #require(ImageHeader.parse(Data(bytes)))
        #expect((header.pixelWidth, header.pixelHeight) == (640, 480))
    }

    // MARK: - Hostile input

    @Test
    func rejectsJPEGsWithoutAUsableFrameHeader() {
        let soi: [UInt8] = [0xFF, 0xD8]
        let cases: [[UInt8]] = [
            soi + [UInt8](repeating: 0xFF, count: 100_000), // fill bytes to the end
            soi + Array([[UInt8]](repeating: [0xFF, 0xD0], count: 50_000).joined()), // endless RSTn
            soi + [0xFF, 0xE0, 0x00, 0x00], // segment length 0
            soi + [0xFF, 0xE0, 0x00, 0x01], // segment length 1
            soi + [0xFF, 0xE1, 0xFF, 0xFF, 0x00], // segment past the end
            soi + [0xFF, 0xDA, 0x00, 0x02, 0xFF, 0xC0], // scan before any frame header
            soi + [0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00, 0x00, 0x02, 0x80], // height 0 (DNL)
            soi + [0xFF, 0xC0, 0x00, 0x11, 0x08, 0x01], // truncated SOF
            soi + Array([[UInt8]](repeating: [0xFF, 0xFE, 0x00, 0x02], count: 20_000).joined()), // COM flood
        ]
        for bytes in cases {
            #expect(ImageHeader.parse(Data(bytes)) == nil)
        }
    }

    @Test
    func rejectsISOBoxesWithHostileSizes() {
        let ftyp = Bytes.ftyp("heic")
        let cases: [[UInt8]] = [
            ftyp + Bytes.be32(1) + Bytes.ascii("meta") + [UInt8](repeating: 0xFF, count: 8), // largesize 2^64-1
            ftyp + Bytes.be32(1) + Bytes.ascii("meta") + Bytes.be32(0) + Bytes.be32(8), // largesize < 16
            ftyp + Bytes.be32(4) + Bytes.ascii("meta"), // size below the header
            ftyp + Bytes.be32(0xFFFF_FFFF) + Bytes.ascii("mdat"), // box past the end, no meta
            ftyp + Bytes.box("meta", [0, 0, 0, 0] + Bytes.be32(0) + Bytes.ascii("iprp")), // size 0 = to end, empty
            ftyp + Bytes.box("meta", [0, 0, 0, 0] + Bytes.box("iprp", Bytes.box("ipco", Bytes.ispe(0, 5)))),
            ftyp + Bytes.box("meta", [0, 0, 0, 0] + Bytes.box("iprp", Bytes.box("ipco", Bytes.box("ispe", [0, 0])))),
            ftyp + Array([[UInt8]](repeating: Bytes.box("free", []), count: 10_000).joined()), // box flood
            ftyp + Bytes.box("meta", [0, 0, 0, 0] + Array([[UInt8]](repeating: Bytes.box("free", []), count: 10_000).joined())),
        ]
        for bytes in cases {
            #expect(ImageHeader.parse(Data(bytes)) == nil)
        }
    }

    @Test
    func ignoresAnIPMAThatPointsOutsideTheProperties() throws {
        // Given associations with an index past ipco's end, and an entry count far too large
        let data = Bytes.heif(properties: [Bytes.ispe(12, 8)], associations: [(item: 1, indices: [0x7F])])
        #expect(ImageHeader.parse(data).map { ($0.pixelWidth, $0.pixelHeight) } ?? (0, 0) == (12, 8))
        var bytes = [UInt8](Bytes.heif(properties: [Bytes.ispe(12, 8)], associations: [(item: 9, indices: [1])]))
        let ipma = try #require(Data(bytes).range(of: Data("ipma".utf8)))
        bytes.replaceSubrange(ipma.upperBound + 4..<ipma.upperBound + 8, with: Bytes.be32(.max))
        #expect(ImageHeader.parse(Data(bytes))?.pixelWidth == 12)
    }

    @Test
    func leavesFrameCountUnknownWhenAChunkOrBlockWalkCannotFinish() throws {
        // A PNG whose second chunk claims 4 GiB
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Bytes.be32(13) + Bytes.ascii("IHDR")
            + Bytes.be32(4) + Bytes.be32(2) + [8, 6, 0, 0, 0] + Bytes.be32(0) + Bytes.be32(.max) + Bytes.ascii("tEXt")
        let pngHeader = try #require(ImageHeader.parse(Data(png)))
        #expect(pngHeader.format == .png)
        #expect(pngHeader.frameCount == nil)
        // A GIF whose image data sub-blocks never terminate
        let gif = Bytes.ascii("GIF89a") + Bytes.le16(4) + Bytes.le16(2) + [0, 0, 0]
            + [0x2C] + [UInt8](repeating: 0, count: 8) + [0, 2] + [UInt8](repeating: 0x10, count: 10_000)
        let gifHeader = try #require(ImageHeader.parse(Data(gif)))
        #expect((gifHeader.pixelWidth, gifHeader.pixelHeight, gifHeader.frameCount) == (4, 2, nil))
        // An animated WebP whose first ANMF chunk claims 4 GiB
        var webp = Bytes.ascii("VP8X") + Bytes.le32(10) + [0x02, 0, 0, 0] + [3, 0, 0] + [1, 0, 0]
        webp += Bytes.ascii("ANMF") + Bytes.le32(.max)
        let riff = Bytes.ascii("RIFF") + Bytes.le32(UInt32(4 + webp.count)) + Bytes.ascii("WEBP") + webp
        let webpHeader = try #require(ImageHeader.parse(Data(riff)))
        #expect((webpHeader.pixelWidth, webpHeader.pixelHeight, webpHeader.frameCount) == (4, 2, nil))
    }

    @Test
    func rejectsTIFFDirectoriesOutsideTheFile() {
        let cases: [[UInt8]] = [
            Bytes.ascii("II") + Bytes.le16(42) + Bytes.le32(.max),
            Bytes.ascii("II") + Bytes.le16(42) + Bytes.le32(8) + Bytes.le16(.max), // 65535 entries, none there
            Bytes.ascii("MM") + Bytes.be16(42) + Bytes.be32(8) + Bytes.be16(1) + Bytes.be16(256) + Bytes.be16(5)
                + Bytes.be32(1) + Bytes.be32(0), // RATIONAL width
            Bytes.ascii("II") + Bytes.le16(43) + Bytes.le32(8), // BigTIFF is detected, not parsed
        ]
        for bytes in cases {
            #expect(ImageHeader.parse(Data(bytes)) == nil)
        }
    }
}
