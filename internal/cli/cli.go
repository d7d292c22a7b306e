// Package cli implements the relock command, one file per subcommand.
// Main is the whole program; cmd/relock only calls it.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// go-redis prints its own log lines (a pool that failed to dial, ...) to
// the process's stderr: into the terminal, and into the stderr relock run
// shares with its command. relock reports what fails itself, so they go
// to slog at debug level, which the default handler drops.
func init() { redis.SetLogger(debugLogger{}) }

// debugLogger is go-redis's logger, routed to slog at debug level.
type debugLogger struct{}

func (debugLogger) Printf(ctx context.Context, format string, v ...any) {
	slog.DebugContext(ctx, fmt.Sprintf(format, v...), "from", "go-redis")
}

// warnLogger is the logger of the relock Clients the subcommands make:
// their warnings and errors go to w.
func warnLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// Exit codes shared by the subcommands. relock run otherwise exits with
// its command's code.
const (
	exitOK          = 0
	exitFailure     = 1   // an error, or a demo that found a violation
	exitUsage       = 2   // bad flags or arguments
	exitNotAcquired = 3   // the lock was not acquired within --wait
	exitLost        = 4   // the lock was lost while the command ran
	exitCannotStart = 127 // the command cannot be started
	exitInterrupted = 130 // 128+SIGINT; other signals give 128+N likewise
)

// relaySignals are the signals relock catches: they cancel the running
// subcommand, and relock run passes them on to its command. SIGQUIT is
// among them so that it does not dump relock's stacks and leave the
// command behind.
var relaySignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// env is what a subcommand may use of the outside world.
type env struct {
	stdout, stderr io.Writer
	stdin          io.Reader
	getenv         func(string) string
	// signals brings every relaySignal relock receives, in order; the
	// first also cancelled the subcommand's context.
	signals <-chan os.Signal
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) int
	local   bool // talks to no Redis: connection flags before it are ignored
}

// commands in the order help lists them.
var commands = []*command{
	demoCommand,
	runCommand,
	electCommand,
	lsCommand,
	showCommand,
	unlockCommand,
	webCommand,
	versionCommand,
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// Main runs the relock command with the given arguments (without the
// program name) and returns its exit code. The first SIGINT, SIGTERM,
// SIGHUP or SIGQUIT cancels the context the subcommand runs with (the
// cause is a signalError); each of them, the first included, also comes
// on the env's signals, for relock run to pass on.
func Main(args []string, stdout, stderr io.Writer) int {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, relaySignals...)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancelCause(context.Background())
	relayed := make(chan os.Signal, 16)
	stop, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case s := <-sigs:
				cancel(signalError{s}) // the first one's cause stays
				select {
				case relayed <- s:
				default: // nobody reads them: only a command relock runs needs them
				}
			case <-stop:
				return
			}
		}
	}()
	defer func() {
		cancel(nil)
		close(stop)
		<-watched
	}()
	stdout, stderr = syncWriters(stdout, stderr)
	e := &env{stdout: stdout, stderr: stderr, stdin: os.Stdin, getenv: os.Getenv, signals: relayed}
	return dispatch(ctx, e, args)
}

// syncWriters makes stdout and stderr safe for the concurrent writes of
// progress lines, log records and a child process's output. Files are
// already; other writers share one mutex, which also covers the case of
// both being the same writer.
func syncWriters(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	mu := new(sync.Mutex)
	wrap := func(w io.Writer) io.Writer {
		if _, ok := w.(*os.File); ok {
			return w
		}
		return &syncWriter{mu: mu, w: w}
	}
	return wrap(stdout), wrap(stderr)
}

type syncWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// signalError is the cancellation cause of Main's context when a signal
// arrived.
type signalError struct{ sig os.Signal }

func (s signalError) Error() string { return "received " + s.sig.String() }

// signalExit returns the exit code of a process ended by sig: 128+N.
func signalExit(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitInterrupted
}

// signalOf returns the signal that cancelled ctx, if one did.
func signalOf(ctx context.Context) (os.Signal, bool) {
	var se signalError
	if errors.As(context.Cause(ctx), &se) {
		return se.sig, true
	}
	return nil, false
}

func dispatch(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stderr)
		return exitUsage
	}
	args, conn, code, done := leadingFlags(e, args)
	if done {
		return code
	}
	name := args[0]
	switch name {
	case "help", "-h", "-help", "--help":
		return help(e, args[1:])
	}
	c := lookup(name)
	if c == nil {
		fmt.Fprintf(e.stderr, "relock: unknown command %q\n\n", name)
		usage(e.stderr)
		return exitUsage
	}
	if !c.local {
		args = append(append([]string{name}, conn...), args[1:]...)
	}
	return c.run(ctx, e, args[1:])
}

// leadingFlags reads the connection flags given before the command
// ("relock --redis URL ls", as "git -C dir" or "kubectl --context"), which
// every command that talks to Redis takes after its name too. It returns
// the arguments from the command on, and the flags read as "-name=value"
// arguments to put right after the command: before and after it they mean
// the same, and one given after it wins. A command that does not talk to
// Redis (version, help) ignores them. With bad flags or no command it
// reports the error and returns done with the exit code.
func leadingFlags(e *env, args []string) (rest, conn []string, code int, done bool) {
	switch args[0] {
	case "-h", "-help", "--help":
		return args, nil, exitOK, false
	}
	if !strings.HasPrefix(args[0], "-") {
		return args, nil, exitOK, false
	}
	fs := flag.NewFlagSet("relock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	addRedisFlags(fs)
	bad := func(msg string) ([]string, []string, int, bool) {
		fmt.Fprintf(e.stderr, "relock: %s\n", msg)
		fmt.Fprintf(e.stderr, "Before the command relock takes the connection flags --redis URL and --cluster; run 'relock help' for usage.\n")
		return nil, nil, exitUsage, true
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(e.stdout)
			return nil, nil, exitOK, true
		}
		return bad(err.Error())
	}
	if fs.NArg() == 0 {
		return bad("no command after the flags")
	}
	fs.Visit(func(f *flag.Flag) { conn = append(conn, "-"+f.Name+"="+f.Value.String()) })
	return fs.Args(), conn, exitOK, false
}

func help(e *env, args []string) int {
	if len(args) == 0 {
		usage(e.stdout)
		return exitOK
	}
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(e.stderr, "relock help: unknown command %q\n", args[0])
		return exitUsage
	}
	return c.run(context.Background(), e, []string{"-h"})
}

func usage(w io.Writer) {
	var b strings.Builder
	b.WriteString(`relock: distributed locks on Redis, Redisson-compatible.

Usage:
	relock [--redis URL] [--cluster] <command> [flags] [arguments]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(&b, "\t%-8s %s\n", c.name, c.summary)
	}
	b.WriteString(`
Run "relock help <command>" for a command's flags.

Redis is chosen by --redis URL, given before the command or after it,
else by $` + envRedisURL + `, else ` + defaultRedisURL + `
(demo alone runs on an embedded in-process Redis when neither is given).
URLs: redis://[user:password@]host:port[/db], rediss:// for TLS, unix:///path,
redis+cluster://host:port,host:port (or --cluster) for Redis Cluster, and
redis+sentinel://[user:password@]host:port,host:port/master[/db] for the
master that Sentinels at those addresses monitor under the name master
(?sentinel_password=... if the Sentinels need one; rediss+ for TLS).

Exit codes: 0 success, 1 failure, 2 usage error, 3 lock not acquired,
4 lock lost; relock run otherwise exits with its command's code.
`)
	io.WriteString(w, b.String())
}

// newFlagSet returns a flag set for a subcommand that reports errors to
// e.stderr and prints usageLine and the flags on -h.
func newFlagSet(e *env, name, usageLine, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("relock "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: relock %s %s\n\n%s\n", name, usageLine, strings.TrimSpace(about))
		var n int
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintf(w, "\nFlags:\n")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parse parses args into fs, a flag set of newFlagSet(e, ...). It returns
// done=true with the exit code when the caller should return at once:
// help was asked for (printed to stdout, exit 0), or the flags were bad
// (the error and the usage go to stderr).
func parse(e *env, fs *flag.FlagSet, args []string) (code int, done bool) {
	// The flag package prints the usage itself, before it says which case
	// it is in; relock prints it once it knows where it goes.
	usage := fs.Usage
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case err == nil:
		return exitOK, false
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(e.stdout)
		fs.Usage()
		fs.SetOutput(e.stderr)
		return exitOK, true
	default:
		fs.Usage()
		return exitUsage, true
	}
}

// given reports whether the flag name was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// usageError reports a bad invocation of a subcommand.
func usageError(e *env, fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "%s: %s\n", fs.Name(), unprefixed(fmt.Sprintf(format, args...)))
	fmt.Fprintf(e.stderr, "Run 'relock help %s' for usage.\n", strings.TrimPrefix(fs.Name(), "relock "))
	return exitUsage
}

// fail reports an error of a subcommand and returns exitFailure.
func fail(e *env, fs *flag.FlagSet, err error) int {
	fmt.Fprintf(e.stderr, "%s: %s\n", fs.Name(), plain(err))
	return exitFailure
}

// plain returns err's message without the "relock: " prefixes the
// library's errors carry, one per wrapping: relock's messages name the
// subcommand once, at the start of the line.
func plain(err error) string { return unprefixed(err.Error()) }

func unprefixed(msg string) string { return strings.ReplaceAll(msg, "relock: ", "") }
