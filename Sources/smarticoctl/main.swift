import ArgumentParser
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// A closed stdout or socket is an error to handle (EPIPE), not a signal that kills us.
signal(SIGPIPE, SIG_IGN)
// A parent may hand its children SIGINT and SIGTERM blocked (a program that reads them from a
// signalfd, as smarticod does): unblock them, so Ctrl-C and `kill` stop a `tail --follow`.
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGINT)
sigaddset(&stopSignals, SIGTERM)
sigprocmask(SIG_UNBLOCK, &stopSignals, nil)
tzset()

// Exit codes of daemon.md: 0 ok, 1 the daemon answered with an error, 2 usage (not
// ArgumentParser's 64), 69 the socket is unreachable.
do {
    var command = try Smarticoctl.parseAsRoot()
    try command.run()
} catch let error as CtlError {
    Output.error(error.description)
    exit(error.exitCode)
} catch {
    if Smarticoctl.exitCode(for: error) == .validationFailure {
        Output.raw(error: Smarticoctl.fullMessage(for: error))
        exit(2)
    }
    Smarticoctl.exit(withError: error)
}
