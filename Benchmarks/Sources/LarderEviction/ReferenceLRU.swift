/// A plain least-recently-used cache of key ids, written for clarity: a dictionary from key to
/// node, and a doubly linked list of nodes in an array, most recently used at the head.
///
/// `LarderEviction` replays every trace through this and through `MemoryStore` (count limit =
/// capacity, overflowTrimRatio 0); the hit counts must be equal.
struct ReferenceLRU {
    private struct Node {
        var key: Int
        var previous: Int  // toward the head (more recent); -1 at the head
        var next: Int  // toward the tail (less recent); -1 at the tail
    }

    let capacity: Int
    private var nodes: [Node] = []
    private var index: [Int: Int] = [:]  // key -> position in `nodes`
    private var head = -1
    private var tail = -1
    private(set) var evictions = 0

    init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
        nodes.reserveCapacity(capacity)
        index.reserveCapacity(capacity)
    }

    var count: Int { index.count }

    /// Looks `key` up; on a hit, moves it to the head.
    mutating func get(_ key: Int) -> Bool {
        guard let position = index[key] else { return false }
        unlink(position)
        pushFront(position)
        return true
    }

    /// Inserts a key that is not present at the head, evicting the tail when full.
    mutating func insert(_ key: Int) {
        precondition(index[key] == nil)
        let position: Int
        if index.count == capacity {
            // Reuse the least recently used node for the new key.
            position = tail
            unlink(position)
            index[nodes[position].key] = nil
            evictions += 1
            nodes[position].key = key
        } else {
            position = nodes.count
            nodes.append(Node(key: key, previous: -1, next: -1))
        }
        index[key] = position
        pushFront(position)
    }

    private mutating func unlink(_ position: Int) {
        let node = nodes[position]
        if node.previous >= 0 { nodes[node.previous].next = node.next } else { head = node.next }
        if node.next >= 0 { nodes[node.next].previous = node.previous } else { tail = node.previous }
    }

    private mutating func pushFront(_ position: Int) {
        nodes[position].previous = -1
        nodes[position].next = head
        if head >= 0 { nodes[head].previous = position }
        head = position
        if tail < 0 { tail = position }
    }
}
