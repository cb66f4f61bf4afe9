// Values of 16 KB and 64 KB that compile quickly: nested tuples of small structs (one
// flat tuple of thousands of elements takes the compiler far too long). Equality
// compares the generation only, so that `==` stays cheap.

/// 128 bytes.
struct Words16: Sendable {
  var words:
    (
      UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
      UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64
    )

  init(_ word: UInt64) {
    let w = word
    words = (w, w, w, w, w, w, w, w, w, w, w, w, w, w, w, w)
  }
}

/// 2 KB.
struct Kilobytes2: Sendable {
  var parts:
    (
      Words16, Words16, Words16, Words16, Words16, Words16, Words16, Words16,
      Words16, Words16, Words16, Words16, Words16, Words16, Words16, Words16
    )

  init(_ word: UInt64) {
    let p = Words16(word)
    parts = (p, p, p, p, p, p, p, p, p, p, p, p, p, p, p, p)
  }
}

/// 16 KB.
struct Kilobytes16: Sendable {
  var parts: (Kilobytes2, Kilobytes2, Kilobytes2, Kilobytes2, Kilobytes2, Kilobytes2, Kilobytes2, Kilobytes2)

  init(_ word: UInt64) {
    let p = Kilobytes2(word)
    parts = (p, p, p, p, p, p, p, p)
  }
}

/// A value of 64 KB (and a word).
struct LargeValue: Sendable, Equatable {
  var generation: Int
  var payload: (Kilobytes16, Kilobytes16, Kilobytes16, Kilobytes16)

  init(_ generation: Int) {
    self.generation = generation
    let p = Kilobytes16(UInt64(truncatingIfNeeded: generation))
    payload = (p, p, p, p)
  }

  static func == (a: Self, b: Self) -> Bool { a.generation == b.generation }
}

/// A value of 16 KB (and a word).
struct MediumValue: Sendable, Equatable {
  var generation: Int
  var payload: Kilobytes16

  init(_ generation: Int) {
    self.generation = generation
    payload = Kilobytes16(UInt64(truncatingIfNeeded: generation))
  }

  static func == (a: Self, b: Self) -> Bool { a.generation == b.generation }
}
