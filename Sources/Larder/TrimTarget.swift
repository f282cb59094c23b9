/// The largest total that satisfies "at or below `(1 - ratio) × limit`".
///
/// Rounds down, except that a product within floating-point error of an integer counts as that
/// integer (so `0.7 × 10` is 7, not 6).
func trimTarget(limit: Int, ratio: Double) -> Int {
    guard ratio > 0 else { return limit }
    let exact = Double(limit) * (1 - ratio)
    guard exact < Double(Int.max) else { return limit }
    let nearest = exact.rounded()
    if abs(exact - nearest) <= 1e-9 * Swift.max(1, exact) { return Int(nearest) }
    return Int(exact.rounded(.down))
}
