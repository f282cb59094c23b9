public import Foundation
import Larder
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A child process that cannot outlive the scope that started it.
///
/// Started only through ``ChildProcessScope/start(_:arguments:environment:)``. Its standard
/// input is `/dev/null`; its standard output and error go to pipes this process owns and drains
/// on threads of their own (never to the test runner's output, which a straggler would hold open
/// and so hang `swift test`). Every child gets `LARDER_PARENT_PID` so a helper can watch for its
/// parent's death. Exit is observed by a thread of its own blocked in `waitpid`, so waiting
/// holds no task thread.
///
/// Spawned with `posix_spawn`, not Foundation's `Process`: `Process` learns of an exit through a
/// socket pair whose child end stays open across `exec`, so a child another test started at the
/// same moment could inherit it and delay this one's exit until its own (tests then time out
/// waiting). Here every descriptor this process creates for a child is close-on-exec, and the
/// child closes every descriptor above standard error as it starts.
public final class ChildProcess: Sendable {
    /// The operating system's process id.
    public let processIdentifier: Int32

    private struct State {
        var exit: (reason: Process.TerminationReason, status: Int32)?
        var waiters: [CheckedContinuation<Void, Never>] = []
        var output = Data()
        var error = Data()
        /// Standard output and error streams not yet read to their end.
        var openStreams = 2
    }
    /// The state the waiting thread and the reader threads share with this object.
    private final class Shared: Sendable {
        let state = Locked(State())
    }
    private let shared: Shared

    fileprivate init(executable: URL, arguments: [String], environment: [String: String]) throws {
        let shared = Shared()
        var environmentVariables = ProcessInfo.processInfo.environment
        environmentVariables["LARDER_PARENT_PID"] = "\(getpid())"
        environmentVariables.merge(environment) { $1 }

        // Read and write ends of the two pipes, and /dev/null: all close-on-exec here; the child
        // gets its copies through the spawn's dup2 actions. (`pipe2` is not in Swift's Glibc
        // module; children spawned meanwhile close what they inherit, see `spawnChild`.)
        var output: [Int32] = [-1, -1]
        var errorOutput: [Int32] = [-1, -1]
        guard Self.closeOnExecPipe(&output) else { throw Self.error(errno) }
        guard Self.closeOnExecPipe(&errorOutput) else {
            let code = errno
            output.forEach { close($0) }
            throw Self.error(code)
        }
        let nullDevice = open("/dev/null", O_RDONLY | O_CLOEXEC)
        let pid: pid_t
        do {
            defer {
                // The child has its copies of the write ends; ours would keep the pipes open forever.
                for descriptor in [output[1], errorOutput[1], nullDevice] where descriptor >= 0 { close(descriptor) }
            }
            guard nullDevice >= 0 else { throw Self.error(errno) }
            pid = try spawnChild(
                executable.path, arguments: arguments, environment: environmentVariables,
                standardStreams: [nullDevice, output[1], errorOutput[1]])
        } catch {
            close(output[0])
            close(errorOutput[0])
            throw error
        }
        self.shared = shared
        processIdentifier = pid
        ChildProcessRegistry.add(pid)
        // Each read end is drained and closed by its own thread at end of file, so no other
        // thread ever closes a descriptor a reader may still be blocked on.
        Self.drain(FileHandle(fileDescriptor: output[0], closeOnDealloc: false), into: shared, isError: false)
        Self.drain(FileHandle(fileDescriptor: errorOutput[0], closeOnDealloc: false), into: shared, isError: true)
        Thread.detachNewThread { Self.awaitExit(of: pid, shared: shared) }
    }

    /// Blocks until `pid` exits, then reaps it and wakes the waiters. The exit is seen first
    /// without reaping (`WNOWAIT`), and the reap and the recorded exit happen under the state's
    /// lock, which ``send(_:)`` also takes: a signal is never sent to a reaped process id,
    /// which the system may already have given to another process.
    private static func awaitExit(of pid: pid_t, shared: Shared) {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1, errno == EINTR {}
        let waiters = shared.state.withLock { state in
            var status: Int32 = 0
            while waitpid(pid, &status, 0) == -1, errno == EINTR {}
            state.exit = waitStatusTermination(status)
            defer { state.waiters = [] }
            return state.waiters
        }
        ChildProcessRegistry.remove(pid)
        for waiter in waiters { waiter.resume() }
    }

    private static func closeOnExecPipe(_ ends: inout [Int32]) -> Bool {
        guard pipe(&ends) == 0 else { return false }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return true
    }

    private static func error(_ code: Int32) -> POSIXError { POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO) }

    private static func drain(_ handle: FileHandle, into shared: Shared, isError: Bool) {
        let handle = UncheckedSendableBox(handle)
        Thread.detachNewThread {
            while true {
                let chunk = handle.value.availableData
                if chunk.isEmpty { break }
                shared.state.withLock { state in
                    if isError { state.error.append(chunk) } else { state.output.append(chunk) }
                }
            }
            shared.state.withLock { $0.openStreams -= 1 }
            try? handle.value.close()
        }
    }

    /// `true` until the process has exited and been reaped.
    public var isRunning: Bool { shared.state.withLock { $0.exit == nil } }

    /// How the process ended (`nil` while it runs).
    public var termination: (reason: Process.TerminationReason, status: Int32)? { shared.state.withLock { $0.exit } }

    /// `true` when the process was ended by a signal.
    public var wasKilledBySignal: Bool { termination?.reason == .uncaughtSignal }

    /// `true` when the process exited on its own with status 0.
    public var exitedCleanly: Bool {
        guard let termination else { return false }
        return termination.reason == .exit && termination.status == 0
    }

    /// What the child has written to standard output so far.
    public var standardOutput: String { String(decoding: shared.state.withLock { $0.output }, as: UTF8.self) }

    /// What the child has written to standard error so far.
    public var standardError: String { String(decoding: shared.state.withLock { $0.error }, as: UTF8.self) }

    /// Sends `signal` unless the process has already been reaped (so a reused process id is
    /// never hit).
    public func send(_ signal: Int32) {
        shared.state.withLock { state in
            if state.exit == nil { _ = Glibc.kill(processIdentifier, signal) }
        }
    }

    /// Sends SIGKILL (see ``send(_:)``).
    public func kill() { send(SIGKILL) }

    /// Waits until the process has exited and been reaped; holds no thread while waiting.
    public func waitForExit() async {
        await withCheckedContinuation { continuation in
            let done = shared.state.withLock { state -> Bool in
                if state.exit != nil { return true }
                state.waiters.append(continuation)
                return false
            }
            if done { continuation.resume() }
        }
    }

    /// Waits for exit for at most `timeout`; returns whether the process exited. After an exit
    /// it also waits (up to 10 s more) until standard output and error are read to their end,
    /// so ``standardOutput`` then holds the child's last line.
    public func waitForExit(timeout: Duration) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while isRunning {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        let drained = ContinuousClock.now + .seconds(10)
        while shared.state.withLock({ $0.openStreams > 0 }) && ContinuousClock.now < drained {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }

    /// Waits until the process has exited and its standard output and error have been read to
    /// their end (a grandchild that inherited them can keep them open: at most `timeout`).
    /// Read ``standardOutput`` after this, not right after ``waitForExit()``: the reader
    /// threads may still hold the last bytes.
    public func waitForOutput(timeout: Duration = .seconds(30)) async {
        await waitForExit()
        let deadline = ContinuousClock.now + timeout
        while shared.state.withLock({ $0.openStreams > 0 }) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Polls standard output for a line starting with `prefix` until `timeout` passes; returns
    /// the rest of that line.
    public func waitForOutputLine(prefix: String, timeout: Duration) async -> String? {
        let deadline = ContinuousClock.now + timeout
        while true {
            // The condition is checked after every wake, so a late wake-up still sees the line.
            if let line = standardOutput.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) {
                return String(line.dropFirst(prefix.count))
            }
            guard ContinuousClock.now < deadline else { return nil }
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// The children a ``withChildProcesses(isolation:_:)`` scope started; all of them are killed and
/// reaped when the scope ends, and at once when its task is cancelled.
public final class ChildProcessScope: Sendable {
    private struct State {
        var children: [ChildProcess] = []
        var isClosed = false
    }
    private let state = Locked(State())

    fileprivate init() {}

    /// Starts `executable` with `arguments` (and extra `environment` variables) as a child of
    /// this scope. Throws `CancellationError` once the scope has been cancelled or closed.
    @discardableResult
    public func start(_ executable: URL, arguments: [String], environment: [String: String] = [:]) throws -> ChildProcess {
        // Start under the lock so a cancellation cannot slip between the start and the record.
        try state.withLock { state in
            guard !state.isClosed else { throw CancellationError() }
            let child = try ChildProcess(executable: executable, arguments: arguments, environment: environment)
            state.children.append(child)
            return child
        }
    }

    /// Every child started so far.
    public var children: [ChildProcess] { state.withLock { $0.children } }

    /// Kills every child (SIGKILL) and refuses new ones; safe from any thread.
    public func cancel() {
        let children = state.withLock { state in
            state.isClosed = true
            return state.children
        }
        for child in children { child.kill() }
    }

    /// Kills every child and waits until each is reaped.
    fileprivate func close() async {
        cancel()
        for child in children { await child.waitForExit() }
    }
}

/// Runs `body` with a scope for child processes; when `body` returns, throws, or its task is
/// cancelled (a Swift Testing time limit cancels it too), every child the scope started is
/// killed and reaped before this function returns.
///
/// ```swift
/// try await withChildProcesses { scope in
///     let child = try scope.start(helper, arguments: ["write", directory.path, log.path])
///     try await Task.sleep(for: .milliseconds(300))
///     child.kill()
///     await child.waitForExit()
/// }
/// ```
public func withChildProcesses<Result>(
    isolation: isolated (any Actor)? = #isolation,
    _ body: (ChildProcessScope) async throws -> Result
) async throws -> Result {
    let scope = ChildProcessScope()
    let result: Swift.Result<Result, any Error>
    do {
        let value = try await withTaskCancellationHandler {
            try await body(scope)
        } onCancel: {
            scope.cancel()
        }
        result = .success(value)
    } catch {
        result = .failure(error)
    }
    await scope.close()
    return try result.get()
}

/// Spawns `path` with `arguments` and exactly `environment`; `standardStreams` become the child's
/// descriptors 0, 1 and 2, and it keeps no other descriptor of this process (glibc 2.34's
/// `posix_spawn_file_actions_addclosefrom_np`, found at run time: Swift's Glibc module does not
/// declare it). Signals start with their default handling and none blocked, as from a shell.
/// Returns the child's process id.
public func spawnChild(_ path: String, arguments: [String], environment: [String: String], standardStreams: [Int32]) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    for (target, descriptor) in standardStreams.enumerated() {
        posix_spawn_file_actions_adddup2(&actions, descriptor, Int32(target))
    }
    if let closeFrom = SpawnSupport.closeFrom { _ = closeFrom(&actions, 3) }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    // This process may ignore SIGPIPE, and an ignored signal stays ignored across exec.
    var defaults = sigset_t()
    sigemptyset(&defaults)
    sigaddset(&defaults, SIGPIPE)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    var unblocked = sigset_t()
    sigemptyset(&unblocked)
    posix_spawnattr_setsigmask(&attributes, &unblocked)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for pointer in argv + envp { free(pointer) } }
    var pid: pid_t = 0
    let code = posix_spawn(&pid, path, &actions, &attributes, argv, envp)
    guard code == 0 else { throw POSIXError(POSIXErrorCode(rawValue: code) ?? .EIO) }
    return pid
}

/// How a process ended, from the status `waitpid` gave: the reason, and the exit status or the
/// signal's number (`<sys/wait.h>`'s macros: the low 7 bits are the signal, 0 when it exited).
public func waitStatusTermination(_ status: Int32) -> (reason: Process.TerminationReason, status: Int32) {
    let signal = status & 0x7F
    return signal == 0 ? (.exit, (status >> 8) & 0xFF) : (.uncaughtSignal, signal)
}

private enum SpawnSupport {
    typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()
}

/// Every live child of this process, killed by an `atexit` handler should the process exit
/// with children still running (a scope that never got to close).
enum ChildProcessRegistry {
    private static let live = Locked<Set<Int32>>([])
    private static let installed = Atomic<Bool>(false)

    static func add(_ pid: Int32) {
        if !installed.exchange(true, ordering: .acquiringAndReleasing) {
            atexit { ChildProcessRegistry.killAll() }
        }
        live.withLock { _ = $0.insert(pid) }
    }

    static func remove(_ pid: Int32) {
        live.withLock { _ = $0.remove(pid) }
    }

    static func killAll() {
        for pid in live.withLock({ $0 }) { Glibc.kill(pid, SIGKILL) }
    }

    /// The children started and not yet reaped.
    static var count: Int { live.withLock { $0.count } }
}

extension ChildProcess {
    /// The number of children of this process that have been started and not yet reaped.
    public static var liveCount: Int { ChildProcessRegistry.count }

    /// Whether a process id names a live process: `false` once it has exited (ESRCH, or a
    /// zombie that only waits for its new parent to reap it).
    public static func isAlive(_ pid: Int32) -> Bool {
        guard Glibc.kill(pid, 0) == 0 || errno != ESRCH else { return false }
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return Glibc.kill(pid, 0) == 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.first != "Z" && fields.first != "X"
    }
}

/// Carries a value across a thread hop; the caller hands it over and never shares it.
public struct UncheckedSendableBox<Value>: @unchecked Sendable {
    public let value: Value
    public init(_ value: Value) { self.value = value }
}
