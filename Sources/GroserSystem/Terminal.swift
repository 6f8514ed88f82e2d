import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The terminal settings a secret prompt replaced, for a SIGINT handler to
/// put back: written before echo goes off, read only by the handler.
nonisolated(unsafe) private var savedTerminal = termios()
private let echoIsOff = Atomic<Bool>(false)

/// Reading what a person types.
public enum Terminal {
    /// True when standard input is a terminal.
    public static var inputIsTerminal: Bool { isatty(0) == 1 }

    /// Reads one line from standard input (without its newline); nil at end of input.
    public static func readLine() -> String? {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(0, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if byte == UInt8(ascii: "\n") { break }
            bytes.append(byte)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Prints `prompt` on standard error and reads a line with echo off, so
    /// a secret never shows on screen; echo is restored even on error.
    public static func readSecret(prompt: String) -> String? {
        StandardStreams.err(prompt)
        var saved = termios()
        let isTTY = tcgetattr(0, &saved) == 0
        if isTTY {
            savedTerminal = saved
            echoIsOff.store(true, ordering: .sequentiallyConsistent)
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(0, TCSAFLUSH, &quiet)
        }
        defer {
            if isTTY {
                echoIsOff.store(false, ordering: .sequentiallyConsistent)
                _ = tcsetattr(0, TCSAFLUSH, &saved)
                StandardStreams.err("\n")
            }
        }
        return readLine()
    }

    /// Puts back the echo a secret prompt turned off; called from a signal
    /// handler, so it does nothing that is not async-signal-safe.
    static func restoreEchoAfterSignal() {
        if echoIsOff.load(ordering: .sequentiallyConsistent) {
            _ = tcsetattr(0, TCSANOW, &savedTerminal)
            _ = write(2, "\n", 1)
        }
    }

    /// Asks a yes/no question on standard error; only "y" or "yes" is yes.
    public static func confirm(_ question: String) -> Bool {
        StandardStreams.err(question + " [y/N] ")
        guard let answer = readLine()?.lowercased() else { return false }
        return answer == "y" || answer == "yes"
    }
}

extension StringProtocol {
    /// Without leading and trailing ASCII white space (space, tab, CR, LF):
    /// what a line of a settings file, a query or a server message is trimmed of.
    public var trimmingSpaces: SubSequence {
        let isSpace: (Character) -> Bool = { $0.isASCII && $0.isWhitespace }
        guard let start = firstIndex(where: { !isSpace($0) }), let end = lastIndex(where: { !isSpace($0) }) else {
            return self[endIndex...]
        }
        return self[start...end]
    }
}
