public import Foundation

// The orphan sweep: leftovers of crashed writes and unreferenced blobs.
extension DiskStore {
    /// Deletes files in `tmp/` and unreferenced blobs older than `gracePeriod` seconds: what a
    /// crash between writing a file and committing (or after deleting) its row leaves behind.
    ///
    /// Runs by itself in the background after an unclean shutdown, at most daily otherwise.
    ///
    /// - Returns: The number of files removed.
    @discardableResult
    public func removeOrphanedFiles(olderThan gracePeriod: TimeInterval = DiskStore.sweepGracePeriod) throws -> Int {
        let cutoff = Date().addingTimeInterval(-gracePeriod)
        let manager = FileManager.default
        var removed = 0
        func isOld(_ path: String) -> Bool {
            guard let date = (try? manager.attributesOfItem(atPath: path))?[.modificationDate] as? Date else { return false }
            return date < cutoff
        }
        for name in (try? manager.contentsOfDirectory(atPath: files.tmpPath)) ?? [] {
            let path = files.tmpPath + "/" + name
            if isOld(path), (try? manager.removeItem(atPath: path)) != nil { removed += 1 }
        }
        let referenced = try withReader { try $0.allFiles() }
        func removeIfOrphaned(_ relative: String) {
            let path = files.path(of: relative)
            if !referenced.contains(relative), isOld(path), (try? manager.removeItem(atPath: path)) != nil { removed += 1 }
        }
        for name in (try? manager.contentsOfDirectory(atPath: files.blobsPath)) ?? [] {
            // Not followed through symbolic links: a link is an orphan like any file.
            let type = (try? manager.attributesOfItem(atPath: files.path(of: name)))?[.type] as? FileAttributeType
            guard type == .typeDirectory else {
                removeIfOrphaned(name)
                continue
            }
            // A shard directory of the layout earlier versions wrote.
            for inner in (try? manager.contentsOfDirectory(atPath: files.path(of: name))) ?? [] {
                removeIfOrphaned(name + "/" + inner)
            }
        }
        let now = configuration.now().milliseconds
        try withLiveIndex { state, index in
            try index.connection.transaction { try index.setMeta("last_sweep", now) }
        }
        return removed
    }

    func sweepInBackground() {
        do {
            try removeOrphanedFiles()
        } catch let error as StorageError where error.code == .closed {
            return
        } catch {
            configuration.logHandler?("background sweep of \(directory.path) failed: \(error)")
        }
    }
}
