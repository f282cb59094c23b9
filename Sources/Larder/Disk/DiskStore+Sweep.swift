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
        func attributes(_ path: String) -> [FileAttributeKey: Any]? { try? manager.attributesOfItem(atPath: path) }
        func isOld(_ attributes: [FileAttributeKey: Any]?) -> Bool {
            guard let date = attributes?[.modificationDate] as? Date else { return false }
            return date < cutoff
        }
        func remove(_ path: String) {
            if (try? manager.removeItem(atPath: path)) != nil { removed += 1 }
        }
        for name in (try? manager.contentsOfDirectory(atPath: files.tmpPath)) ?? [] {
            let path = files.tmpPath + "/" + name
            if isOld(attributes(path)) { remove(path) }
        }
        let referenced = try withReader { try $0.allFiles() }
        for name in (try? manager.contentsOfDirectory(atPath: files.blobsPath)) ?? [] {
            let path = files.path(of: name)
            // One look at each entry, not followed through symbolic links: a link is an orphan
            // like any file.
            let found = attributes(path)
            guard found?[.type] as? FileAttributeType == .typeDirectory else {
                if !referenced.contains(name), isOld(found) { remove(path) }
                continue
            }
            // A shard directory of the layout earlier versions wrote.
            for inner in (try? manager.contentsOfDirectory(atPath: path)) ?? [] {
                let innerPath = path + "/" + inner
                if !referenced.contains(name + "/" + inner), isOld(attributes(innerPath)) { remove(innerPath) }
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
