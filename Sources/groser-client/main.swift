import GroserCLI
#if canImport(Glibc)
import Glibc
#endif

exit(ClientCommand.run(Array(CommandLine.arguments.dropFirst())))
