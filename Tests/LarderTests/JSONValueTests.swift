import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// `JSONValue`: JSON on disk, the object itself in memory; other types decode the JSON, and
/// bad input is a specific error.
@Suite(.timeLimit(.minutes(10)))
struct JSONValueTests {
    /// An immutable class, so that a test can tell the held object from a decoded copy.
    final class Profile: Codable, Sendable {
        let name: String
        let visits: Int
        init(name: String, visits: Int) { (self.name, self.visits) = (name, visits) }
    }

    /// The same fields under another type: decodable from a `Profile`'s JSON.
    struct ProfileView: Codable, Equatable, Sendable {
        var name: String
        var visits: Int
    }

    let folder: TemporaryDirectory

    init() throws {
        folder = try TemporaryDirectory("json-value")
    }

    @Test func aValueKeepsItsObjectAndDecodesOtherTypesFromItsJSON() throws {
        let profile = Profile(name: "ada", visits: 3)
        let value = try JSONValue(encoding: profile)

        #expect(try value.decoded(as: Profile.self) === profile)
        #expect(try JSONDecoder().decode(ProfileView.self, from: value.json) == ProfileView(name: "ada", visits: 3))
        #expect(try value.decoded(as: ProfileView.self) == ProfileView(name: "ada", visits: 3))
        // Reading as another type kept nothing over the held object.
        #expect(try value.decoded(as: Profile.self) === profile)
        #expect(value.cacheCost == value.json.count)
    }

    @Test func aValueReadFromJSONDecodesOnceAndSharesTheResultWithItsCopies() throws {
        let value = JSONValue(json: Data(#"{"name":"bo","visits":1}"#.utf8))
        let copy = value
        let first = try value.decoded(as: Profile.self)
        #expect(first.name == "bo" && first.visits == 1)
        #expect(try copy.decoded(as: Profile.self) === first)
    }

    @Test func badInputThrowsSpecificErrors() throws {
        let value = JSONValue(json: Data("[1, 2]".utf8))
        #expect {
            try value.decoded(as: Profile.self)
        } throws: { error in
            (error as? StorageError)?.code == .decoding && (error as? StorageError)?.cause is DecodingError
        }
        let notJSON = JSONValue(json: Data([0xFF, 0x00]))
        #expect(throws: StorageError.self) { try notJSON.decoded(as: [Int].self) }
        // A failed read leaves a later good read unaffected.
        #expect(try value.decoded(as: [Int].self) == [1, 2])

        #expect {
            try JSONValue(encoding: Double.nan)
        } throws: { error in
            (error as? StorageError)?.code == .encoding && (error as? StorageError)?.cause is EncodingError
        }
    }

    @Test func theDiskKeepsTheJSONAndAMemoryHitAfterADiskReadDecodesNothing() async throws {
        let storage = try Storage<String, JSONValue>(transformer: .jsonValue) { $0.directory = folder.url }
        defer { storage.close() }
        let profile = Profile(name: "ada", visits: 3)
        try await storage.setValue(JSONValue(encoding: profile), forKey: "p")

        // Given the value in memory, Then a hit is the object itself.
        #expect(try await storage.value(forKey: "p")?.decoded(as: Profile.self) === profile)
        // The disk tier holds the JSON.
        let onDisk = try #require(try await storage.value(forKey: "p", tiers: .disk))
        #expect(try JSONDecoder().decode(ProfileView.self, from: onDisk.json) == ProfileView(name: "ada", visits: 3))

        // Given memory emptied, Then a read comes from disk, decodes once, and the promoted copy
        // answers later hits with that decoded object.
        _ = try await storage.removeAll(tiers: .memory)
        let fromDisk = try #require(try await storage.value(forKey: "p")).decoded(as: Profile.self)
        #expect(fromDisk !== profile && fromDisk.name == "ada")
        #expect(try await storage.value(forKey: "p", tiers: .memory)?.decoded(as: Profile.self) === fromDisk)
    }
}
