import Foundation

/// The disk index's `tags` table: which entries carry which tag, so that
/// ``DiskStore/removeValues(taggedWith:)`` finds them without a scan.
///
/// One row per (tag, entry row id). Triggers keep it true to the entries: a deleted entry loses
/// its rows, and so does an overwritten one (every write sets `created`), so only the tags of
/// the latest write of a key are ever there; a tagged write adds its rows after the entry's, in
/// the same transaction. Statements are prepared once, on the writer's connection.
final class DiskTagIndex {
    /// The schema step that adds the table (run by ``DiskIndex``'s migration).
    static let upgradeAddingTags = """
        CREATE TABLE tags (tag TEXT NOT NULL, entry INTEGER NOT NULL, PRIMARY KEY (tag, entry)) WITHOUT ROWID;
        CREATE INDEX tags_by_entry ON tags (entry);
        CREATE TRIGGER entries_forget_tags AFTER DELETE ON entries BEGIN
            DELETE FROM tags WHERE entry = OLD.rowid;
        END;
        CREATE TRIGGER entries_replace_tags AFTER UPDATE OF created ON entries BEGIN
            DELETE FROM tags WHERE entry = OLD.rowid;
        END;
        PRAGMA user_version = 6;
        """

    private let insertTag: SQLiteStatement
    private let deleteTagged: SQLiteStatement
    private let selectTags: SQLiteStatement

    init(connection: SQLiteConnection) throws {
        insertTag = try connection.statement(
            "INSERT OR IGNORE INTO tags (tag, entry) SELECT ?1, rowid FROM entries WHERE key = ?2")
        deleteTagged = try connection.statement(
            "DELETE FROM entries WHERE rowid IN (SELECT entry FROM tags WHERE tag = ?) RETURNING file, key")
        selectTags = try connection.statement(
            "SELECT t.tag FROM entries AS e CROSS JOIN tags AS t ON t.entry = e.rowid WHERE e.key = ? ORDER BY t.tag")
    }

    /// Tags the entry of `key` (call in the write transaction, after its row is written; a row
    /// that is not there, evicted by the write itself, gets none).
    func tag(_ key: String, with tags: Set<String>) throws {
        for tag in tags {
            try insertTag.withReset { statement in
                try statement.bind(tag, at: 1)
                try statement.bind(key, at: 2)
                _ = try statement.step()
            }
        }
    }

    /// Deletes every entry tagged `tag` (call in a write transaction); returns their keys and
    /// blob files.
    func deleteEntries(taggedWith tag: String) throws -> (keys: [String], files: [String]) {
        try deleteTagged.withReset { statement in
            try statement.bind(tag, at: 1)
            var keys: [String] = []
            var files: [String] = []
            while try statement.step() {
                if let file = statement.optionalString(0) { files.append(file) }
                keys.append(statement.string(1))
            }
            return (keys, files)
        }
    }

    /// The tags of the entry of `key`, sorted; none for a key without an entry.
    func tags(forKey key: String) throws -> [String] {
        try selectTags.withReset { statement in
            try statement.bind(key, at: 1)
            var tags: [String] = []
            while try statement.step() { tags.append(statement.string(0)) }
            return tags
        }
    }
}
