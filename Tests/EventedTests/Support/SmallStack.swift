// Threads with a stack of a chosen size, and a measure of how much of it a piece of
// code touches.
//
// The stack is mapped here, with an inaccessible guard page below it, and filled with
// a pattern before the thread starts. After the thread returns, the lowest byte that
// no longer holds the pattern is as deep as the stack ever went: the figure is exact
// and needs no crash to find. Code that goes deeper than the stack hits the guard page
// and stops the test process, as it would on a thread of that size anywhere.

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Whether the tests run under Thread Sanitizer, which makes every frame larger: its
/// runtime is linked in, and found by name.
let isThreadSanitized: Bool = {
  #if canImport(Darwin)
    let everywhere = UnsafeMutableRawPointer(bitPattern: -2)  // RTLD_DEFAULT
  #else
    let everywhere: UnsafeMutableRawPointer? = nil  // RTLD_DEFAULT
  #endif
  return dlsym(everywhere, "__tsan_init") != nil
}()

/// The body of a thread started by ``stackDepth(onStackOf:_:)``.
private final class StackThreadBody {
  let body: () -> Void
  init(_ body: @escaping () -> Void) { self.body = body }
}

private let stackPattern: UInt8 = 0xA5

/// Runs `body` on a new thread whose stack is `size` bytes, waits for it, and returns
/// how many bytes of that stack were used: by `body`, and by the thread's own start
/// (a few kilobytes; see ``stackDepthOfAnEmptyThread``).
func stackDepth(onStackOf size: Int, _ body: @escaping () -> Void) -> Int {
  let page = Int(sysconf(Int32(_SC_PAGESIZE)))
  let size = (size + page - 1) / page * page
  #if canImport(Glibc)
    let flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE
  #else
    let flags = MAP_PRIVATE | MAP_ANON
  #endif
  guard let mapping = mmap(nil, size + page, PROT_READ | PROT_WRITE, flags, -1, 0), mapping != MAP_FAILED else {
    fatalError("could not map a stack of \(size) bytes")
  }
  defer { munmap(mapping, size + page) }
  precondition(mprotect(mapping, page, PROT_NONE) == 0, "could not protect the guard page")
  let stack = mapping + page
  memset(stack, Int32(stackPattern), size)

  var attributes = pthread_attr_t()
  pthread_attr_init(&attributes)
  defer { pthread_attr_destroy(&attributes) }
  precondition(pthread_attr_setstack(&attributes, stack, size) == 0, "could not set the stack")
  let context = Unmanaged.passRetained(StackThreadBody(body)).toOpaque()
  #if canImport(Glibc)
    var thread = pthread_t()
    let created = pthread_create(
      &thread, &attributes,
      { context in
        Unmanaged<StackThreadBody>.fromOpaque(context!).takeRetainedValue().body()
        return nil
      }, context)
    precondition(created == 0, "could not start a thread")
    pthread_join(thread, nil)
  #else
    var thread: pthread_t?
    let created = pthread_create(
      &thread, &attributes,
      { context in
        Unmanaged<StackThreadBody>.fromOpaque(context).takeRetainedValue().body()
        return nil
      }, context)
    precondition(created == 0, "could not start a thread")
    pthread_join(thread!, nil)
  #endif

  let bytes = stack.assumingMemoryBound(to: UInt8.self)
  var untouched = 0
  while untouched < size, bytes[untouched] == stackPattern { untouched += 1 }
  return size - untouched
}

/// What a thread uses of its stack before it runs any code of the caller's (the
/// thread's start, and on Linux its thread-local storage, kept at the top of a stack
/// that the caller maps).
let stackDepthOfAnEmptyThread: Int = stackDepth(onStackOf: 1 << 20) {}

/// How many bytes of the stack `body` needs, beyond what an empty thread uses, when
/// run on a thread whose stack is `size` bytes.
func stackUsed(onStackOf size: Int, by body: @escaping () -> Void) -> Int {
  stackDepth(onStackOf: size, body) - stackDepthOfAnEmptyThread
}
