import Foundation
@testable import LarderImage
import Testing

@Suite(.timeLimit(.minutes(10)))
struct ImageFormatTests {
    // MARK: - Fixtures

    @Test(arguments: Fixture.all)
    func detectsTheFormatOfEveryFixture(_ fixture: Fixture) throws {
        // Given a real file written by an encoder (or built by hand from the specification)
        let data = try fixture.data
        // Then its signature names its format
        #expect(ImageFormat.detect(data) == fixture.format)
    }

    @Test(arguments: Fixture.all)
    func detectsEveryPrefixAsNothingOrTheSameFormatFamily(_ fixture: Fixture) throws {
        let data = try fixture.data
        for length in 0...data.count {
            let detected = ImageFormat.detect(data.prefix(length))
            // A prefix of an APNG may end before `acTL`: PNG is the only other acceptable answer.
            let acceptable: [ImageFormat?] = fixture.format == .apng ? [nil, .apng, .png] : [nil, fixture.format]
            #expect(acceptable.contains(detected), "prefix of \(length) bytes detected as \(String(describing: detected))")
        }
    }

    @Test(arguments: Fixture.all)
    func detectsTheFormatOfASliceThatDoesNotStartAtIndexZero(_ fixture: Fixture) throws {
        // Given the bytes at a non-zero startIndex (a Data slice)
        let padded = Data([0xAA, 0xBB, 0xCC]) + (try fixture.data)
        let slice = padded.dropFirst(3)
        #expect(slice.startIndex == 3)
        // Then detection reads relative to the slice
        #expect(ImageFormat.detect(slice) == fixture.format)
    }

    // MARK: - Strictness

    @Test(arguments: [
        [UInt8](), [0xFF], [0xFF, 0xD8], [0xFF, 0xD8, 0xFF, 0x00], [0x89, 0x50, 0x4E, 0x47],
        Bytes.ascii("GIF88a"), Bytes.ascii("GIF8"), Bytes.ascii("RIFF") + Bytes.le32(4) + Bytes.ascii("WAVEfmt "),
        Bytes.ascii("RIFF") + Bytes.le32(4) + Bytes.ascii("WEBPVP9 "), Bytes.ascii("BM"),
        Bytes.ascii("BM") + [UInt8](repeating: 0, count: 12) + Bytes.le32(41), Bytes.ascii("II*"),
        Bytes.ascii("MM*\0"), [0x00, 0x00, 0x01, 0x00, 0x00, 0x00], Bytes.ascii("%PDF"),
        Bytes.ascii("<html><svg></svg></html>"), Bytes.ascii("<svgfoo>"), Bytes.ascii("hello <svg>"),
        Bytes.ascii("<!-- unterminated <svg>"), Bytes.ascii("<?xml version=\"1.0\"?><html/>"),
        Bytes.ftyp("isom", compatible: ["mp41"]), Bytes.ftyp("qt  "),
    ])
    func rejectsNearMissSignatures(_ bytes: [UInt8]) {
        #expect(ImageFormat.detect(Data(bytes)) == nil)
    }

    @Test
    func requiresIHDRAsTheFirstPNGChunk() {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        #expect(ImageFormat.detect(Data(signature + Bytes.be32(13) + Bytes.ascii("IHDR"))) == .png)
        #expect(ImageFormat.detect(Data(signature + Bytes.be32(13) + Bytes.ascii("tEXt"))) == nil)
    }

    @Test
    func tellsAPNGFromPNGByAnACTLChunkBeforeIDAT() throws {
        // Given an APNG fixture, whose acTL comes before IDAT
        let apng = try Fixture.all.first { $0.name == "animated.png" }!.data
        #expect(ImageFormat.detect(apng) == .apng)
        // When acTL is renamed to a private chunk type
        let data = try #require(apng.range(of: Data("acTL".utf8)))
        var renamed = apng
        renamed.replaceSubrange(data, with: Data("zzTL".utf8))
        // Then it is a plain PNG
        #expect(ImageFormat.detect(renamed) == .png)
    }

    @Test
    func readsHEIFBrandsFromTheMajorAndCompatibleBrands() {
        #expect(ImageFormat.detect(Data(Bytes.ftyp("heic"))) == .heic)
        #expect(ImageFormat.detect(Data(Bytes.ftyp("heix"))) == .heic)
        #expect(ImageFormat.detect(Data(Bytes.ftyp("avif"))) == .avif)
        #expect(ImageFormat.detect(Data(Bytes.ftyp("avis"))) == .avif)
        #expect(ImageFormat.detect(Data(Bytes.ftyp("mif1"))) == .heif)
        #expect(ImageFormat.detect(Data(Bytes.ftyp("mif1", compatible: ["miaf", "avif"]))) == .avif)
        #expect(ImageFormat.detect(Data(Bytes.ftyp("mif1", compatible: ["heic"]))) == .heic)
        #expect(ImageFormat.detect(Data(Bytes.ftyp("msf1", compatible: ["iso8"]))) == .heif)
        #expect(ImageFormat.detect(Data(Bytes.ftyp("isom", compatible: ["avif"]))) == .avif)
    }

    @Test
    func detectsEveryWebPChunkKind() {
        for chunk in ["VP8 ", "VP8L", "VP8X"] {
            let bytes = Bytes.ascii("RIFF") + Bytes.le32(100) + Bytes.ascii("WEBP") + Bytes.ascii(chunk)
            #expect(ImageFormat.detect(Data(bytes)) == .webp, "\(chunk)")
        }
    }

    @Test
    func detectsBothTIFFByteOrdersAndBigTIFF() {
        for signature in ["II*\0", "MM\0*", "II+\0", "MM\0+"] {
            #expect(ImageFormat.detect(Data(Bytes.ascii(signature) + [0, 0, 0, 8])) == .tiff, "\(signature)")
        }
    }

    // MARK: - SVG

    @Test(arguments: [
        "<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
        "\u{FEFF}<svg>",
        "  \n\t<svg\n width=\"1\">",
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg/>",
        "<?xml version=\"1.0\"?><?xml-stylesheet href=\"a.css\"?><svg>",
        "<!-- <html> --><svg>",
        "<?xml version=\"1.0\"?>\n<!-- one -->\n<!-- two -->\n<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"x>y\">\n<svg>",
        "<!DOCTYPE svg [ <!ENTITY a \"<>\"> ]><svg>",
        "<svg:svg xmlns:svg=\"http://www.w3.org/2000/svg\">",
    ])
    func detectsSVGAfterItsProlog(_ text: String) {
        #expect(ImageFormat.detect(Data(text.utf8)) == .svg)
    }

    @Test
    func stopsLookingForTheSVGRootAfterTheSniffLimit() {
        // Given an SVG root element behind a comment longer than the scan bound
        let comment = "<!--" + String(repeating: " ", count: ImageFormat.textSniffLimit) + "-->"
        // Then it is not found, and near the bound it still is
        #expect(ImageFormat.detect(Data((comment + "<svg>").utf8)) == nil)
        let shorter = "<!--" + String(repeating: " ", count: ImageFormat.textSniffLimit - 20) + "-->"
        #expect(ImageFormat.detect(Data((shorter + "<svg>").utf8)) == .svg)
    }

    // MARK: - Identity

    @Test
    func comparesFormatsByIdentifierOnly() {
        let custom = ImageFormat("png", mimeType: "image/x-png")
        #expect(custom == .png)
        #expect(Set([custom, .png, .jpeg]).count == 2)
        #expect(ImageFormat("qoi", mimeType: "image/qoi") != .png)
    }

    @Test
    func givesEveryKnownFormatADistinctIdentifierAndAMIMEType() {
        #expect(Set(ImageFormat.knownFormats).count == ImageFormat.knownFormats.count)
        for format in ImageFormat.knownFormats {
            #expect(format.mimeType.contains("/"), "\(format)")
        }
        #expect(ImageFormat.webp.mimeType == "image/webp")
        #expect(ImageFormat.jpegXL.mimeType == "image/jxl")
    }
}
