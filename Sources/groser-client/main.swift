import GroserCLI
#if canImport(Glibc)
import Glibc
#endif

// groser-client: runs the command line it was given (GroserCLI) and exits
// with its code.

exit(ClientCommand.run(Array(CommandLine.arguments.dropFirst())))
