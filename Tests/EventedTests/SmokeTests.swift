import Testing
@testable import Evented
@Test func smoke() { let p = Property(1); #expect(p.value == 1) }
