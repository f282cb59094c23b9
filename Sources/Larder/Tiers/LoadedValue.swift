/// A loaded value crossing the coalescer; only made where `Value` is `Sendable`.
struct LoadedValue<Value>: @unchecked Sendable {
    // @unchecked: created and read only in `Storage where Value: Sendable`.
    let value: Value
}
