import RelayCore
import Testing

@Suite struct CachedValueTests {
    /// Reused for `windowMs` after it is stored, then gone until stored again; a clock that went
    /// backwards (another thread's older reading) does not serve it either.
    @Test func servesAValueOnlyWithinItsWindow() {
        var cache = CachedValue<Int>(windowMs: 1000)
        #expect(cache.value(now: 0) == nil)
        cache.store(7, now: 5000)
        #expect(cache.value(now: 5000) == 7)
        #expect(cache.value(now: 5999) == 7)
        #expect(cache.value(now: 6000) == nil)
        #expect(cache.value(now: 4999) == nil)
        cache.store(8, now: 6000)
        #expect(cache.value(now: 6500) == 8)
    }
}
