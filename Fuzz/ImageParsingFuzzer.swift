// libFuzzer entry point for the image sniffing, header parsing and completeness checks in
// LarderImage.
//
// Built by Fuzz/run together with the LarderImage sources that need nothing but Foundation
// (ImageFormat*, ImageHeader*, Parsing/*), so the fuzzer exercises the shipping code itself.
// Besides "no crash, no hang, no sanitizer report", it checks the documented contracts that a
// fuzzer can check: a parsed header has positive dimensions, names the format that `detect`
// reports for the same bytes, and the answers do not change when the bytes sit in a slice that
// does not start at index 0.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzImageParsing(_ start: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    let data = count > 0 && start != nil ? Data(bytes: start!, count: count) : Data()
    let format = ImageFormat.detect(data)
    let header = ImageHeader.parse(data)
    if let header {
        guard header.pixelWidth > 0, header.pixelHeight > 0 else {
            fatalError("ImageHeader.parse returned non-positive dimensions \(header.pixelWidth)x\(header.pixelHeight)")
        }
        guard header.format == format else {
            fatalError("ImageHeader.parse reported \(header.format), detect reported \(String(describing: format))")
        }
        if let frames = header.frameCount, frames < 1 {
            fatalError("ImageHeader.parse returned \(frames) frames")
        }
        _ = header.estimatedDecodedCost
    }
    // Completeness is answered for every format without trapping, and agrees on slices.
    let complete = ImageFormat.isComplete(data)
    if complete, format == nil {
        fatalError("ImageFormat.isComplete accepted bytes of no known format")
    }
    // The same bytes as a slice with a non-zero start index must give the same answers.
    var padded = Data([0xA5, 0x5A, 0xA5])
    padded.append(data)
    let slice = padded[3...]
    guard ImageFormat.detect(slice) == format else {
        fatalError("ImageFormat.detect differs for a slice: \(String(describing: format)) vs \(String(describing: ImageFormat.detect(slice)))")
    }
    guard ImageHeader.parse(slice) == header else {
        fatalError("ImageHeader.parse differs for a slice")
    }
    guard ImageFormat.isComplete(slice) == complete else {
        fatalError("ImageFormat.isComplete differs for a slice")
    }
    return 0
}
