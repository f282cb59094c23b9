import Foundation
import Testing
@testable import Larder

@Suite struct ExpiryTests {
    @Test func neverHasNoExpirationDate() {
        #expect(Expiry.never.expirationDate(from: Date()) == nil)
    }

    @Test func secondsAreCountedFromTheWrite() {
        let now = Date(timeIntervalSince1970: 1_000)
        #expect(Expiry.seconds(30).expirationDate(from: now) == Date(timeIntervalSince1970: 1_030))
    }

    @Test func dateIsTakenAsGiven() {
        let end = Date(timeIntervalSince1970: 5)
        #expect(Expiry.date(end).expirationDate(from: Date(timeIntervalSince1970: 99)) == end)
    }

    @Test func nonFiniteSecondsAreInvalid() {
        #expect(!Expiry.seconds(.nan).isValid)
        #expect(!Expiry.seconds(.infinity).isValid)
        #expect(Expiry.seconds(0).isValid)
    }
}
