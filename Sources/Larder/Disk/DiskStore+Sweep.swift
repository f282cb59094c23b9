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
        for shard in (try? manager.contentsOfDirectory(atPath: files.blobsPath)) ?? [] {
            let shardPath = files.blobsPath + "/" + shard
            for name in (try? manager.contentsOfDirectory(atPath: shardPath)) ?? [] {
                let relative = shard + "/" + name
                if !referenced.contains(relative), isOld(shardPath + "/" + name),
                   (try? manager.removeItem(atPath: shardPath + "/" + name)) != nil {
                    removed += 1
                }
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
