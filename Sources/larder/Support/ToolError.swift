import Foundation
import Larder

/// An error the tool reports as one line, `larder: error: <message>`, with an exit status.
struct ToolError: Error, CustomStringConvertible {
    /// The message, one line, without the `larder: error:` prefix.
    var message: String
    /// The process exit status. Defaults to 1.
    var status: Int32 = 1

    init(_ message: String, status: Int32 = 1) {
        self.message = message
        self.status = status
    }

    var description: String { message }
}

/// One line describing `error` for a person: no type names, no debug dumps.
func describe(_ error: any Error) -> String {
    switch error {
    case let error as ToolError:
        return error.message
    case let error as StorageError:
        return error.description
    case let error as CocoaError:
        if let underlying = error.userInfo[NSUnderlyingErrorKey] as? POSIXError {
            let path = error.userInfo[NSFilePathErrorKey] as? String
            return (path.map { "\($0): " } ?? "") + String(cString: strerror(underlying.code.rawValue))
        }
        return error.localizedDescription
    case let error as POSIXError:
        return String(cString: strerror(error.code.rawValue))
    default:
        return "\(error)"
    }
}

/// Folds a message onto one line, so an error is always exactly one line on standard error.
func oneLine(_ text: String) -> String {
    text.split(whereSeparator: \.isNewline)
        .map { $0.trimmingCharacters(in: .whitespaces) }
        .filter { !$0.isEmpty }
        .joined(separator: " ")
}

/// Writes `text` and a newline to standard error, unbuffered.
func printError(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

/// The description of the last C call's failure (`errno`).
func systemError(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
