import Foundation
import LarderTestSupport
import Testing
@testable import Larder

/// ``DiskStoreDirectoryTests``' deletion matrix again and again, each operation right after the
/// deletion (within the interval at which reads look at the directory), sequentially and in
/// parallel. A suite of its own for its time limit: the issue's acceptance run of 200 rounds
/// takes about half an hour on a busy two-core machine.
@Suite(.timeLimit(.minutes(120)))
struct DiskStoreDeletionLoopTests {
    let matrix: DiskStoreDirectoryTests

    init() throws {
        matrix = try DiskStoreDirectoryTests()
    }

    /// Rounds of the matrix for each test: `LARDER_DELETION_ROUNDS`, else 5 (each round is
    /// every operation, with no reads before the deletion, with reads on the same thread and
    /// with reads on another: 66 stores).
    static var deletionRounds: Int {
        Int(ProcessInfo.processInfo.environment["LARDER_DELETION_ROUNDS"] ?? "") ?? 5
    }

    /// The rows of one round, each in a directory of its own (removed after it): every row
    /// runs, and one that throws is recorded as an issue naming it.
    func checkDeletionRound(_ round: Int) {
        for readsFirst in DiskStoreDirectoryTests.Deletion.ReadsFirst.allCases {
            for operation in DiskStoreDirectoryTests.Operation.allCases {
                let row = "round-\(round)-\(readsFirst)-\(operation.rawValue)"
                let directory = matrix.folder.url.appendingPathComponent(row)
                do {
                    try matrix.checkDeletedDirectory(
                        operation, in: directory, deletion: .init(waits: false, readsFirst: readsFirst))
                } catch {
                    Issue.record("\(row): \(error)")
                }
                try? FileManager.default.removeItem(at: directory)
            }
        }
    }

    @Test func theDeletionMatrixHoldsWithNoWaitRoundAfterRound() {
        // Given a store whose directory is deleted (its readers holding the index, or none
        // opened yet), when an operation follows at once, within the interval at which reads
        // look at the directory: then no operation throws or reports the old contents, and
        // the directory is created again
        for round in 0..<Self.deletionRounds { checkDeletionRound(round) }
    }

    @Test func theDeletionMatrixHoldsWithNoWaitInParallel() async {
        // The same, four rounds at a time (each round on stores of its own), in child tasks
        // so that their issues are this test's
        let rounds = Self.deletionRounds
        await withTaskGroup(of: Void.self) { group in
            for lane in 0..<4 {
                group.addTask {
                    for round in stride(from: lane, to: rounds, by: 4) { checkDeletionRound(1_000 + round) }
                }
            }
        }
    }
}
