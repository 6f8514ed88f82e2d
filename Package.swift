// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "groser",
    products: [
        .library(name: "GroserClient", targets: ["GroserClient"]),
        .executable(name: "groserd", targets: ["groserd"]),
        .executable(name: "groser-client", targets: ["groser-client"]),
        .executable(name: "groser-bench", targets: ["groser-bench"]),
    ],
    targets: [
        // C libraries from Debian, and the committed protoc-c output.
        .systemLibrary(
            name: "CProtobufC",
            pkgConfig: "libprotobuf-c",
            providers: [.apt(["libprotobuf-c-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        // libpq, for the PostgreSQL store shared by several hosts.
        .systemLibrary(
            name: "CPostgres",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // Snowball stemmers (Debian's libstemmer-dev ships no pkg-config file).
        .systemLibrary(name: "CStemmer", providers: [.apt(["libstemmer-dev"])]),
        .systemLibrary(name: "CLinux"),
        .target(name: "CGroserProto", dependencies: ["CProtobufC"]),

        // Pure wire code: framing, status codes, the catalog model and its
        // protobuf-c conversion. The only module that touches protobuf-c memory.
        .target(name: "GroserWire", dependencies: ["CGroserProto", "CProtobufC"]),
        // Every syscall: sockets, epoll, signals, errno; and the daemon's
        // Logger (its JSON lines are quoted by GroserWire's JSONString).
        .target(name: "GroserSystem", dependencies: ["CLinux", "GroserWire"]),
        // Storage behind the CatalogStore protocol; SQLite is the embedded store,
        // PostgreSQL (libpq) the shared one. Session tokens are kept as BLAKE2b
        // hashes (libsodium).
        .target(name: "GroserStorage", dependencies: ["GroserWire", "GroserSystem", "CLinux", "CSQLite", "CSodium", "CPostgres"]),
        // Product search: tokens, Snowball stems, typos, the per-store index
        // and its ranking. Pure but for the stemmer; no storage, no sockets.
        .target(name: "GroserSearch", dependencies: ["GroserWire", "GroserSystem", "CStemmer"]),
        // Request handling (pure) and the event loops that move frames.
        .target(name: "GroserServer", dependencies: ["GroserWire", "GroserSystem", "GroserStorage", "GroserSearch", "CSodium"]),
        // The client library other packages depend on.
        .target(name: "GroserClient", dependencies: ["GroserWire", "GroserSystem"]),
        // A command-tree parser shaped like swift-argument-parser: one
        // declaration per command and option, from which the parser, --help,
        // did-you-mean, completion scripts, the manual and docs/CLI.md come.
        .target(name: "GroserCommandLine"),
        // groser-client's commands and output formats.
        .target(name: "GroserCLI", dependencies: ["GroserClient", "GroserCommandLine", "GroserSystem"]),
        // groser-bench's load generator: options, connections, histogram, report.
        .target(name: "GroserBench", dependencies: ["GroserWire", "GroserSystem", "GroserClient"]),

        .executableTarget(name: "groserd", dependencies: ["GroserServer", "GroserStorage", "GroserSystem"]),
        .executableTarget(name: "groser-client", dependencies: ["GroserCLI"]),
        .executableTarget(name: "groser-bench", dependencies: ["GroserBench"]),

        // The fuzz harness: raw bytes through framing, decoding, the request
        // handler and the commerce rules on a temporary SQLite store, with no
        // socket. groser-fuzz replays files through it; tools/fuzz builds it
        // with -DGROSER_FUZZ -sanitize=fuzzer,address as a libFuzzer target.
        .target(name: "GroserFuzz", dependencies: ["GroserServer", "GroserStorage", "GroserWire", "GroserSystem"]),
        .systemLibrary(name: "CLibFuzzer"),
        .executableTarget(name: "groser-fuzz", dependencies: ["GroserFuzz", "GroserSystem", "CLibFuzzer"]),

        .testTarget(name: "GroserWireTests", dependencies: ["GroserWire", "GroserSystem"]),
        .testTarget(name: "GroserCommandLineTests", dependencies: ["GroserCommandLine"]),
        .testTarget(name: "GroserStorageTests", dependencies: ["GroserStorage", "GroserWire", "GroserSystem"]),
        .testTarget(name: "GroserSearchTests", dependencies: ["GroserSearch", "GroserWire", "GroserStorage"]),
        .testTarget(name: "GroserServerTests", dependencies: ["GroserServer", "GroserStorage", "GroserWire", "GroserSystem"]),
        .testTarget(name: "GroserBenchTests", dependencies: ["GroserBench", "GroserWire", "GroserSystem"]),
        .testTarget(name: "IntegrationTests", dependencies: ["GroserClient", "GroserSystem", "GroserStorage"]),
        // Runs the fuzz seed corpus and every saved crash input (Tests/Fuzz).
        .testTarget(name: "GroserFuzzTests", dependencies: ["GroserFuzz", "GroserWire"]),
    ],
    swiftLanguageModes: [.v6]
)
