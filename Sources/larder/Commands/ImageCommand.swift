import ArgumentParser
import Foundation
import LarderImage

/// `larder image …`: image helpers.
struct ImageCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "image",
        abstract: "Image helpers.",
        subcommands: [InspectCommand.self])
}

/// `larder image inspect FILE...`: format, pixel size and frames from the header, no decoding.
struct InspectCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "inspect",
        abstract: "Show the format, pixel size, frames and byte count of image files.",
        discussion: """
            Reads headers only, without decoding. A file that is not a recognised image is \
            listed with an unknown format. An unreadable file is reported on standard error, the \
            others are still listed, and the exit status is 1. With --json, prints an array of \
            {"file", "format", "mime_type", "width", "height", "frames", "animated", "bytes"}; \
            format, mime_type, width, height and frames are null when unknown.
            """)

    @Argument(help: "The image files.", completion: .file())
    var files: [String]

    @Flag(help: "Print JSON (keys documented above).")
    var json = false

    func validate() throws {
        if files.isEmpty { throw ValidationError("give at least one image file") }
    }

    struct Inspection {
        var file: String
        var bytes: Int
        var format: ImageFormat?
        var header: ImageHeader?

        var complete: Bool

        init(file: String, data: Data) {
            self.file = file
            bytes = data.count
            complete = ImageFormat.isComplete(data)
            header = ImageHeader.parse(data)
            format = header?.format ?? ImageFormat.detect(data)
        }

        var json: [String: Any] {
            [
                "file": file,
                "bytes": bytes,
                "format": jsonOrNull(format?.identifier),
                "mime_type": jsonOrNull(format?.mimeType),
                "width": jsonOrNull(header?.pixelWidth),
                "height": jsonOrNull(header?.pixelHeight),
                "frames": jsonOrNull(header?.frameCount),
                "animated": header?.isAnimated ?? false,
                "orientation": jsonOrNull(header?.orientation),
                "oriented_width": jsonOrNull(header?.orientedPixelWidth),
                "oriented_height": jsonOrNull(header?.orientedPixelHeight),
                "complete": complete,
            ]
        }
    }

    func run() throws {
        var inspections: [Inspection] = []
        var failures: [String] = []
        for file in files {
            do {
                inspections.append(Inspection(file: file, data: try readFile(file)))
            } catch {
                failures.append(describe(error))
            }
        }
        if json {
            try printJSON(inspections.map(\.json))
        } else if !inspections.isEmpty {
            var table = Table([.left, .left, .left, .right, .left, .right, .left, .right])
            table.append("FILE", "FORMAT", "MIME TYPE", "PIXELS", "ORIENTATION", "FRAMES", "COMPLETE", "BYTES")
            for inspection in inspections {
                let pixels = inspection.header.map { "\($0.pixelWidth)×\($0.pixelHeight)" } ?? "-"
                let orientation = inspection.header.map { header in
                    header.orientation == 1 ? "1" : "\(header.orientation) → \(header.orientedPixelWidth)×\(header.orientedPixelHeight)"
                } ?? "-"
                let frames = inspection.header?.frameCount.map(String.init) ?? "-"
                table.append(
                    displayKey(inspection.file), inspection.format?.identifier ?? "unknown",
                    inspection.format?.mimeType ?? "-", pixels, orientation, frames,
                    inspection.format == nil ? "-" : (inspection.complete ? "yes" : "no"), formatCount(inspection.bytes))
            }
            table.print()
        }
        guard failures.isEmpty else {
            for failure in failures.dropLast() { printError("larder: error: \(oneLine(failure))") }
            throw ToolError(failures.last!)
        }
    }
}
