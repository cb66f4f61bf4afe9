import Foundation

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Runs `executable` with `arguments` and returns its exit status (nil if it could not
/// be collected), standard output and standard error.
///
/// Not `Foundation.Process`: Swift Testing's exit tests wait for any child of the test
/// process, and when that wait collects a child first, `Process.waitUntilExit()` never
/// returns. Here the end of the child is its closing of both pipes, and the status is
/// collected with `waitpid`, which returns at once either way.
func runChild(
  _ executable: URL, _ arguments: [String], environment: [String: String] = [:]
) throws -> (status: Int32?, output: String, error: String) {
  var outPipe: [Int32] = [0, 0]
  var errPipe: [Int32] = [0, 0]
  guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { throw POSIXError(.EMFILE) }
  #if canImport(Glibc)
    var actions = posix_spawn_file_actions_t()
  #else
    var actions: posix_spawn_file_actions_t? = nil
  #endif
  posix_spawn_file_actions_init(&actions)
  defer { posix_spawn_file_actions_destroy(&actions) }
  posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
  posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
  for fd in outPipe + errPipe { posix_spawn_file_actions_addclose(&actions, fd) }
  var variables = ProcessInfo.processInfo.environment
  for (key, value) in environment { variables[key] = value }
  let argv = ([executable.path] + arguments).map { strdup($0) } + [nil]
  let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
  defer {
    for pointer in argv { free(pointer) }
    for pointer in envp { free(pointer) }
  }
  var pid: pid_t = 0
  let spawned = posix_spawn(&pid, executable.path, &actions, nil, argv, envp)
  close(outPipe[1])
  close(errPipe[1])
  guard spawned == 0 else {
    close(outPipe[0])
    close(errPipe[0])
    throw POSIXError(POSIXErrorCode(rawValue: spawned) ?? .ENOENT)
  }
  // Both pipes are read at once, so that a child filling one never blocks on it.
  let errorText = Locked("")
  let errorEnd = errPipe[0]
  let done = DispatchSemaphore(value: 0)
  Thread {
    errorText.set(readToEnd(errorEnd))
    done.signal()
  }.start()
  let output = readToEnd(outPipe[0])
  done.wait()
  var raw: Int32 = 0
  let status: Int32? =
    waitpid(pid, &raw, 0) == pid ? (raw & 0x7f == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)) : nil
  return (status, output, errorText.get())
}

private func readToEnd(_ fd: Int32) -> String {
  var data = [UInt8]()
  var buffer = [UInt8](repeating: 0, count: 65_536)
  while true {
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    if count > 0 {
      data += buffer[..<count]
    } else if count == 0 || errno != EINTR {
      break
    }
  }
  close(fd)
  return String(decoding: data, as: UTF8.self)
}

/// A value behind a lock, for handing a result from one thread to another.
private final class Locked: @unchecked Sendable {
  // @unchecked Sendable: `lock` guards `value`.
  private let lock = NSLock()
  private var value: String

  init(_ value: String) { self.value = value }

  func set(_ new: String) { lock.withLock { value = new } }
  func get() -> String { lock.withLock { value } }
}
