#if Hummingbird
import Foundation
import LarderImage

/// Nearest-neighbour resizing of uncompressed 24- and 32-bit BMP files: enough for an example
/// without an image library (a real app calls its codec, such as libvips, here).
enum BMP {
    struct UnsupportedImage: Error {}

    static func resize(_ data: Data, to size: ImageKey.PixelSize) throws -> Data {
        let bytes = [UInt8](data)
        func read(_ offset: Int, _ count: Int) -> Int {
            (0..<count).reduce(0) { $0 | Int(bytes[offset + $1]) << (8 * $1) }
        }
        guard bytes.count >= 54, bytes[0] == 0x42, bytes[1] == 0x4D, read(30, 4) == 0 else { throw UnsupportedImage() }
        let offset = read(10, 4), pixel = read(28, 2) / 8
        let sourceWidth = Int(Int32(truncatingIfNeeded: read(18, 4))), rawHeight = Int(Int32(truncatingIfNeeded: read(22, 4)))
        let sourceHeight = abs(rawHeight), sourceStride = (sourceWidth * pixel + 3) & ~3
        guard pixel == 3 || pixel == 4, sourceWidth > 0, sourceHeight > 0,
              offset + sourceStride * sourceHeight <= bytes.count else { throw UnsupportedImage() }
        let (width, height) = (size.width, size.height), stride = (width * pixel + 3) & ~3
        var output = [UInt8](repeating: 0, count: 54 + stride * height)
        func write(_ value: Int, at offset: Int, _ count: Int = 4) {
            for index in 0..<count { output[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
        }
        output[0] = 0x42; output[1] = 0x4D
        write(output.count, at: 2); write(54, at: 10); write(40, at: 14); write(width, at: 18); write(height, at: 22)
        write(1, at: 26, 2); write(pixel * 8, at: 28, 2); write(stride * height, at: 34)
        for row in 0..<height {  // rows bottom-up, as the output's positive height says
            let fromBottom = row * sourceHeight / height
            let sourceRow = rawHeight > 0 ? fromBottom : sourceHeight - 1 - fromBottom
            for column in 0..<width {
                let from = offset + sourceRow * sourceStride + column * sourceWidth / width * pixel
                let to = 54 + row * stride + column * pixel
                output[to..<(to + pixel)] = bytes[from..<(from + pixel)]
            }
        }
        return Data(output)
    }
}
#endif
