import GroserSystem

/// What a server says of itself: the protocol version it speaks (ServerInfo
/// reports it; PROTOCOL.md §1) and its name and release.
public enum ProtocolInfo {
    public static let version: UInt32 = 1
    public static let serverVersion = "groserd " + GroserRelease.version
}
