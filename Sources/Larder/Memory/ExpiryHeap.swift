/// The slots of the entries that can expire, as a binary min-heap on their expiration.
///
/// Lets an overflowing write (and a trim, and ``MemoryStore/removeExpired()``) drop the expired
/// entries first without scanning the store: the earliest expiration is at the root. Entries
/// that never expire are not in the heap, so a store without expiry pays nothing but an
/// `isEmpty` check.
///
/// - Complexity: ``insert(_:expiration:)``, ``remove(_:)`` and ``update(_:expiration:)`` are
///   O(log k) for k entries that can expire; ``earliest`` is O(1).
@usableFromInline
struct ExpiryHeap {
    @usableFromInline
    struct Node {
        @usableFromInline var expiration: Double
        @usableFromInline var slot: Int

        @inlinable
        init(expiration: Double, slot: Int) {
            self.expiration = expiration
            self.slot = slot
        }
    }

    @usableFromInline var nodes: ContiguousArray<Node> = []
    /// The heap position of each slot, or -1 for a slot not in the heap.
    @usableFromInline var positions: ContiguousArray<Int> = []

    @inlinable
    init() {}

    @inlinable var isEmpty: Bool { nodes.isEmpty }
    @inlinable var count: Int { nodes.count }

    /// The entry that expires first, if any.
    @inlinable var earliest: Node? { nodes.first }

    /// Adds `slot`, which must not be in the heap.
    @usableFromInline
    mutating func insert(_ slot: Int, expiration: Double) {
        while positions.count <= slot { positions.append(-1) }
        nodes.append(Node(expiration: expiration, slot: slot))
        positions[slot] = nodes.count - 1
        siftUp(nodes.count - 1)
    }

    /// Removes `slot`, which must be in the heap.
    @usableFromInline
    mutating func remove(_ slot: Int) {
        let position = positions[slot]
        positions[slot] = -1
        let last = nodes.removeLast()
        guard position < nodes.count else { return }
        nodes[position] = last
        positions[last.slot] = position
        siftDown(siftUp(position))
    }

    /// Changes the expiration of `slot`, which must be in the heap.
    @usableFromInline
    mutating func update(_ slot: Int, expiration: Double) {
        let position = positions[slot]
        nodes[position].expiration = expiration
        siftDown(siftUp(position))
    }

    /// Forgets every slot.
    mutating func removeAll() {
        nodes.removeAll()
        positions.removeAll()
    }

    /// Moves the node at `position` up while it expires before its parent; returns where it is.
    @discardableResult
    @usableFromInline
    mutating func siftUp(_ position: Int) -> Int {
        var child = position
        let node = nodes[child]
        while child > 0 {
            let parent = (child - 1) / 2
            guard node.expiration < nodes[parent].expiration else { break }
            nodes[child] = nodes[parent]
            positions[nodes[child].slot] = child
            child = parent
        }
        nodes[child] = node
        positions[node.slot] = child
        return child
    }

    @usableFromInline
    mutating func siftDown(_ position: Int) {
        var parent = position
        let node = nodes[parent]
        while true {
            var child = 2 * parent + 1
            guard child < nodes.count else { break }
            if child + 1 < nodes.count, nodes[child + 1].expiration < nodes[child].expiration { child += 1 }
            guard nodes[child].expiration < node.expiration else { break }
            nodes[parent] = nodes[child]
            positions[nodes[parent].slot] = parent
            parent = child
        }
        nodes[parent] = node
        positions[node.slot] = parent
    }

    /// Descriptions of broken invariants, given every slot that can expire with its expiration.
    func invariantViolations(expiring: [Int: Double]) -> [String] {
        var problems: [String] = []
        if nodes.count != expiring.count { problems.append("expiry heap holds \(nodes.count) slots, \(expiring.count) can expire") }
        for (position, node) in nodes.enumerated() {
            if expiring[node.slot] != node.expiration { problems.append("expiry heap slot \(node.slot) has a wrong expiration") }
            if positions[node.slot] != position { problems.append("expiry heap position of slot \(node.slot) is wrong") }
            if position > 0, nodes[(position - 1) / 2].expiration > node.expiration {
                problems.append("expiry heap order broken at \(position)")
            }
        }
        if positions.filter({ $0 >= 0 }).count != nodes.count { problems.append("expiry heap positions disagree") }
        return problems
    }
}
