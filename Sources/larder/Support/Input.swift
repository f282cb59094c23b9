import ArgumentParser
import Foundation

/// Reads the whole file at `path`, with a one-line error naming the file and the reason.
func readFile(_ path: String) throws -> Data {
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else { throw ToolError("cannot read \(path): \(systemError())") }
    defer { close(descriptor) }
    var info = stat()
    guard fstat(descriptor, &info) == 0 else { throw ToolError("cannot read \(path): \(systemError())") }
    if (info.st_mode & S_IFMT) == S_IFDIR { throw ToolError("cannot read \(path): \(systemError(EISDIR))") }
    return try readAll(descriptor, name: path)
}

/// Reads standard input to its end.
func readStandardInput() throws -> Data {
    try readAll(STDIN_FILENO, name: "standard input")
}

private func readAll(_ descriptor: Int32, name: String) throws -> Data {
    var data = Data()
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            throw ToolError("cannot read \(name): \(systemError())")
        }
        if count == 0 { return data }
        data.append(contentsOf: buffer[0..<count])
    }
}

/// Writes `data` to standard output, unbuffered; a closed pipe or a full disk is an error.
func writeStandardOutput(_ data: Data) throws {
    try data.withUnsafeBytes { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(STDOUT_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                throw ToolError("cannot write to standard output: \(systemError())")
            }
            offset += written
        }
    }
}

/// A byte count: a whole number with an optional binary suffix (`512`, `64K`, `10MiB`, `2G`).
struct ByteCount: ExpressibleByArgument, Hashable {
    var value: Int

    init(_ value: Int) {
        self.value = value
    }

    init?(argument: String) {
        let text = argument.trimmingCharacters(in: .whitespaces).uppercased()
        let suffixes: [(String, Int)] = [
            ("KIB", 1 << 10), ("MIB", 1 << 20), ("GIB", 1 << 30), ("TIB", 1 << 40),
            ("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40),
            ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40), ("B", 1),
        ]
        var digits = Substring(text)
        var multiplier = 1
        if let (suffix, factor) = suffixes.first(where: { text.hasSuffix($0.0) }) {
            digits = digits.dropLast(suffix.count)
            multiplier = factor
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCIIDigitCharacter), let number = Int(digits) else { return nil }
        let (product, overflow) = number.multipliedReportingOverflow(by: multiplier)
        guard !overflow else { return nil }
        value = product
    }

    static var defaultCompletionKind: CompletionKind { .default }
}

extension Character {
    fileprivate var isASCIIDigitCharacter: Bool { ("0"..."9").contains(self) }
}

/// A whole number of entries, zero or more.
struct EntryCount: ExpressibleByArgument, Hashable {
    var value: Int

    init?(argument: String) {
        guard !argument.isEmpty, argument.allSatisfy(\.isASCIIDigitCharacter), let value = Int(argument) else {
            return nil
        }
        self.value = value
    }
}
