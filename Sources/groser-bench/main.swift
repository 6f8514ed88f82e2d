import GroserBench
#if canImport(Glibc)
import Glibc
#endif

// groser-bench: runs the benchmark the command line asks for (GroserBench)
// and exits with its code.

exit(BenchCommand.run(Array(CommandLine.arguments.dropFirst())))
