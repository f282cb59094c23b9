/// A set of intrusive doubly-linked lists over integer slot indices, stored in one array.
///
/// Every slot belongs to at most one of the `listCount` lists. The links live in a contiguous
/// array indexed by slot, so moving a slot to the front is four array writes and never
/// allocates (array-index nodes are markedly faster than class nodes on Linux, where each class
/// node costs an allocation plus reference counting on every link update).
///
/// The front of a list is its most recently used slot, the back its least recently used.
///
/// - Complexity: Every operation is O(1) except growing the storage, which is amortized O(1).
@usableFromInline
struct LRUList {
    /// The links of one slot. `none` marks the end of a list.
    @usableFromInline
    struct Link {
        @usableFromInline var previous: Int
        @usableFromInline var next: Int

        @inlinable
        init(previous: Int, next: Int) {
            self.previous = previous
            self.next = next
        }
    }

    /// The index that marks "no slot".
    @inlinable static var none: Int { -1 }

    @usableFromInline var links: ContiguousArray<Link> = []
    @usableFromInline var heads: ContiguousArray<Int>
    @usableFromInline var tails: ContiguousArray<Int>

    /// Creates `listCount` empty lists.
    @inlinable
    init(listCount: Int) {
        heads = ContiguousArray(repeating: Self.none, count: listCount)
        tails = ContiguousArray(repeating: Self.none, count: listCount)
    }

    /// The most recently used slot of `list`, if any.
    @inlinable
    func first(in list: Int) -> Int? {
        let head = heads[list]
        return head == Self.none ? nil : head
    }

    /// The least recently used slot of `list`, if any.
    @inlinable
    func last(in list: Int) -> Int? {
        let tail = tails[list]
        return tail == Self.none ? nil : tail
    }

    /// The slot after `slot` (towards the least recently used end), if any.
    @inlinable
    func slot(after slot: Int) -> Int? {
        let next = links[slot].next
        return next == Self.none ? nil : next
    }

    /// Inserts `slot`, which must not be in any list, at the front of `list`.
    @inlinable
    mutating func pushFront(_ slot: Int, in list: Int) {
        if slot >= links.count {
            // No `reserveCapacity(slot + 1)` here: it allocates exactly that much, which would
            // copy the whole array for every new slot (quadratic); `append` grows geometrically.
            while links.count <= slot {
                links.append(Link(previous: Self.none, next: Self.none))
            }
        }
        let head = heads[list]
        links[slot] = Link(previous: Self.none, next: head)
        if head != Self.none {
            links[head].previous = slot
        } else {
            tails[list] = slot
        }
        heads[list] = slot
    }

    /// Unlinks `slot` from `list`, which must contain it.
    @inlinable
    mutating func remove(_ slot: Int, from list: Int) {
        let link = links[slot]
        if link.previous != Self.none {
            links[link.previous].next = link.next
        } else {
            heads[list] = link.next
        }
        if link.next != Self.none {
            links[link.next].previous = link.previous
        } else {
            tails[list] = link.previous
        }
    }

    /// Moves `slot`, which `list` contains, to the front of `list`.
    ///
    /// This is the hot path of every cache hit, so it works on the raw buffer: one uniqueness
    /// check instead of one per link written.
    @inlinable @inline(__always)
    mutating func moveToFront(_ slot: Int, in list: Int) {
        let head = heads[list]
        guard head != slot else { return }
        let none = Self.none
        let newTail: Int? = links.withUnsafeMutableBufferPointer { links in
            // `slot` is not the head, so it has a previous link.
            let link = links[slot]
            links[link.previous].next = link.next
            if link.next != none {
                links[link.next].previous = link.previous
            }
            links[slot] = Link(previous: none, next: head)
            links[head].previous = slot
            return link.next == none ? link.previous : nil
        }
        if let newTail { tails[list] = newTail }
        heads[list] = slot
    }

    /// Moves `slot`, which `list` contains and which has been pushed before (so its link
    /// exists), to the front of `target` (may be `list`).
    ///
    /// ``remove(_:from:)`` then ``pushFront(_:in:)`` in one pass over the raw buffers: one
    /// uniqueness check per array instead of one per link written, and no growth check. The
    /// hot path of a W-TinyLFU hit in probation (the promotion and the demotion it causes).
    @inlinable @inline(__always)
    mutating func move(_ slot: Int, from list: Int, toFrontOf target: Int) {
        let none = Self.none
        links.withUnsafeMutableBufferPointer { links in
            heads.withUnsafeMutableBufferPointer { heads in
                tails.withUnsafeMutableBufferPointer { tails in
                    let link = links[slot]
                    if link.previous != none {
                        links[link.previous].next = link.next
                    } else {
                        heads[list] = link.next
                    }
                    if link.next != none {
                        links[link.next].previous = link.previous
                    } else {
                        tails[list] = link.previous
                    }
                    let head = heads[target]
                    links[slot] = Link(previous: none, next: head)
                    if head != none {
                        links[head].previous = slot
                    } else {
                        tails[target] = slot
                    }
                    heads[target] = slot
                }
            }
        }
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
        for list in heads.indices {
            heads[list] = Self.none
            tails[list] = Self.none
        }
    }
}
