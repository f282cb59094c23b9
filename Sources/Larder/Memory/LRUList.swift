/// A set of intrusive doubly-linked lists over integer slot indices, stored in one array.
///
/// Every slot belongs to at most one of the `listCount` lists. The links live in a contiguous
/// array indexed by slot, so moving a slot to the front is a few array writes and never
/// allocates (array-index nodes are markedly faster than class nodes on Linux, where each class
/// node costs an allocation plus reference counting on every link update).
///
/// Each list is circular through a sentinel node of its own, kept in the same array before the
/// slots' nodes (node `list` is list `list`'s sentinel, node `listCount + slot` is `slot`'s):
/// the sentinel's `next` is the list's front and its `previous` its back, so linking and
/// unlinking never branch on "first" or "last", and every operation works on one buffer (one
/// uniqueness check, instead of one per array written, as separate head and tail arrays cost).
/// Links are 32-bit (8 bytes a node), as the store's key index limits slots to `Int32`.
///
/// The front of a list is its most recently used slot, the back its least recently used.
///
/// - Complexity: Every operation is O(1) except growing the storage, which is amortized O(1).
@usableFromInline
struct LRUList {
    /// The links of one node, as node indices.
    @usableFromInline
    struct Link {
        @usableFromInline var previous: Int32
        @usableFromInline var next: Int32

        @inlinable
        init(previous: Int32, next: Int32) {
            self.previous = previous
            self.next = next
        }
    }

    /// The sentinels (first `listCount` nodes), then one node per slot pushed so far.
    @usableFromInline var links: ContiguousArray<Link>
    @usableFromInline let listCount: Int

    /// Creates `listCount` empty lists.
    @inlinable
    init(listCount: Int) {
        self.listCount = listCount
        links = ContiguousArray((0..<listCount).map { Link(previous: Int32($0), next: Int32($0)) })
    }

    /// The node of `slot`.
    @inlinable @inline(__always)
    func node(_ slot: Int) -> Int32 { Int32(truncatingIfNeeded: slot &+ listCount) }

    /// The slot of a node that is not a sentinel.
    @inlinable @inline(__always)
    func slot(ofNode node: Int32) -> Int { Int(node) &- listCount }

    /// The most recently used slot of `list`, if any.
    @inlinable
    func first(in list: Int) -> Int? {
        let head = links.withUnsafeBufferPointer { $0[list].next }
        return Int(head) == list ? nil : slot(ofNode: head)
    }

    /// The least recently used slot of `list`, if any.
    @inlinable
    func last(in list: Int) -> Int? {
        let tail = links.withUnsafeBufferPointer { $0[list].previous }
        return Int(tail) == list ? nil : slot(ofNode: tail)
    }

    /// The slot after `slot` (towards the least recently used end), if any.
    @inlinable
    func slot(after slot: Int) -> Int? {
        let next = links[Int(node(slot))].next
        return Int(next) < listCount ? nil : self.slot(ofNode: next)
    }

    /// Inserts `slot`, which must not be in any list, at the front of `list`.
    @inlinable
    mutating func pushFront(_ slot: Int, in list: Int) {
        let node = node(slot)
        if Int(node) >= links.count {
            precondition(slot >= 0 && slot < Int(Int32.max) - listCount, "LRUList: slot \(slot) out of range")
            // No `reserveCapacity(slot + 1)` here: it allocates exactly that much, which would
            // copy the whole array for every new slot (quadratic); `append` grows geometrically.
            while links.count <= Int(node) {
                links.append(Link(previous: -1, next: -1))
            }
        }
        links.withUnsafeMutableBufferPointer { links in
            Self.link(node, toFrontOf: Int32(truncatingIfNeeded: list), in: links)
        }
    }

    /// Unlinks `slot` from `list`, which must contain it.
    @inlinable
    mutating func remove(_ slot: Int, from list: Int) {
        let node = node(slot)
        links.withUnsafeMutableBufferPointer { links in Self.unlink(node, in: links) }
    }

    /// Moves `slot`, which `list` contains, to the front of `list`.
    ///
    /// This is the hot path of every cache hit.
    @inlinable @inline(__always)
    mutating func moveToFront(_ slot: Int, in list: Int) {
        let node = node(slot)
        let sentinel = Int32(truncatingIfNeeded: list)
        links.withUnsafeMutableBufferPointer { links in
            guard links[Int(sentinel)].next != node else { return }
            Self.unlink(node, in: links)
            Self.link(node, toFrontOf: sentinel, in: links)
        }
    }

    /// Moves `slot`, which `list` contains and which has been pushed before (so its link
    /// exists), to the front of `target` (may be `list`).
    ///
    /// ``remove(_:from:)`` then ``pushFront(_:in:)`` in one pass over the raw buffer, with no
    /// growth check. The hot path of a W-TinyLFU hit in probation (the promotion and the
    /// demotion it causes).
    @inlinable @inline(__always)
    mutating func move(_ slot: Int, from list: Int, toFrontOf target: Int) {
        let node = node(slot)
        links.withUnsafeMutableBufferPointer { links in
            Self.unlink(node, in: links)
            Self.link(node, toFrontOf: Int32(truncatingIfNeeded: target), in: links)
        }
    }

    /// Moves `slot`, which `list` contains, to the front of `target`, then, when `demote` is
    /// true, moves `target`'s last slot (the least recently used, maybe `slot` itself) to the
    /// front of `list`. Returns that demoted slot, or -1.
    ///
    /// ``move(_:from:toFrontOf:)`` twice in one pass over the raw buffer (one uniqueness check):
    /// the hot path of a W-TinyLFU hit in probation, whose promotion to protected pushes
    /// protected's oldest entry back to probation.
    @inlinable @inline(__always)
    mutating func promote(_ slot: Int, from list: Int, toFrontOf target: Int, demotingLast demote: Bool) -> Int {
        let node = node(slot)
        let listCount = listCount
        return links.withUnsafeMutableBufferPointer { links in
            let sentinel = Int32(truncatingIfNeeded: target)
            Self.unlink(node, in: links)
            Self.link(node, toFrontOf: sentinel, in: links)
            guard demote else { return -1 }
            let last = links.baseAddress.unsafelyUnwrapped[Int(sentinel)].previous
            Self.unlink(last, in: links)
            Self.link(last, toFrontOf: Int32(truncatingIfNeeded: list), in: links)
            return Int(last) &- listCount
        }
    }

    /// Unlinks `node` from the list that holds it.
    @inlinable @inline(__always)
    static func unlink(_ node: Int32, in links: UnsafeMutableBufferPointer<Link>) {
        let base = links.baseAddress.unsafelyUnwrapped
        let link = base[Int(node)]
        base[Int(link.previous)].next = link.next
        base[Int(link.next)].previous = link.previous
    }

    /// Links `node`, which no list holds, at the front of the list of `sentinel`.
    @inlinable @inline(__always)
    static func link(_ node: Int32, toFrontOf sentinel: Int32, in links: UnsafeMutableBufferPointer<Link>) {
        let base = links.baseAddress.unsafelyUnwrapped
        let head = base[Int(sentinel)].next
        base[Int(node)] = Link(previous: sentinel, next: head)
        base[Int(head)].previous = node
        base[Int(sentinel)].next = node
    }

    /// The slots of `list` from front to back (for diagnostics and tests; O(n)).
    func slots(in list: Int) -> [Int] {
        var result: [Int] = []
        var current = first(in: list)
        while let slot = current {
            result.append(slot)
            current = self.slot(after: slot)
        }
        return result
    }

    /// Empties every list, keeping the allocated storage.
    @inlinable
    mutating func removeAll() {
        links.removeAll(keepingCapacity: true)
        for list in 0..<listCount {
            links.append(Link(previous: Int32(truncatingIfNeeded: list), next: Int32(truncatingIfNeeded: list)))
        }
    }
}
