import GroserBench
#if canImport(Glibc)
import Glibc
#endif

exit(BenchCommand.run(Array(CommandLine.arguments.dropFirst())))
