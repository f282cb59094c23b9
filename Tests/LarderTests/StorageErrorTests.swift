import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// Every error of the public API is a `StorageError` that names what failed and keeps its cause.
@Suite
struct StorageErrorTests {
    struct Refused: Error, Equatable {
        var reason: String
    }

    @Test func aDirectoryUnderARegularFileIsAnIOErrorKeepingTheSystemCause() throws {
        let folder = try TemporaryDirectory("errors")
        let file = folder.url.appendingPathComponent("plain")
        try Data("x".utf8).write(to: file)
        let error = #expect(throws: StorageError.self) {
            try DiskStore(directory: file.appendingPathComponent("cache"))
        }
        #expect(error?.code == .io)
        #expect(error?.path == file.appendingPathComponent("cache").path)
        #expect(error?.cause != nil)
        #expect(error.map { "\($0)" }?.contains("Not a directory") == true)
    }

    @Test func aTransformerErrorIsKeptAsAValue() throws {
        let transformer = Transformer<String>(
            encode: { _ in throw Refused(reason: "no") }, decode: { String(decoding: $0, as: UTF8.self) })
        let folder = try TemporaryDirectory("errors")
        let storage = try Storage<String, String>(configuration: .init(directory: folder.url), transformer: transformer)
        let error = #expect(throws: StorageError.self) { try storage.setValue("v", forKey: "k") }
        #expect(error?.code == .encoding)
        #expect(error?.cause as? Refused == Refused(reason: "no"))
    }

    @Test func codesAreAnOpenSetMatchedByEquality() {
        let error = StorageError.closed
        #expect(error.code == .closed)
        #expect(error.code != .io)
        // A switch over codes needs a default, so a new code breaks no caller.
        let name: String
        switch error.code {
        case .closed: name = "closed"
        default: name = "other"
        }
        #expect(name == "closed")
        #expect(StorageError.Code.io.description == "io")
    }
}
