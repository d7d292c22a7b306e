package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/relock-go/relock"
)

var electCommand = &command{
	name:    "elect",
	summary: "run a command only while leader of an election; or follow its leaders",
	run:     runElect,
}

const electAbout = `
Campaigns in the election NAME and runs the command once elected, for as
long as it leads. The leader's value (--value, default the host name and
process id) is published for everyone to read (relock show, relock elect
--observe, Election.Leader). Leadership is a lock kept alive by the
watchdog, and the command is stopped as relock run stops it: SIGTERM
--grace before leadership would be lost with no renewal confirmed, SIGKILL
when it is lost, and relock exits with code 4. When the
command exits relock resigns, and the next campaigner is elected at once.

With --again, relock campaigns again after the command exits or the
leadership is lost, and runs the command afresh each time it is elected,
until a signal stops it (exit 128+N).

The command sees RELOCK_ELECTION (the name), RELOCK_TERM (the term, a
fencing token greater than every earlier leader's) and RELOCK_VALUE in its
environment. Exit codes are those of relock run; 3 if not elected within
--wait.

With --observe, relock runs no command: it prints the leader and then each
change (a new leader, a new value, a term ended with no successor yet), one
line each, until interrupted; --json prints each as a JSON object (fields
value, term, holder, host, pid, program, client, since; holder is empty
when there is no leader).`

func runElect(ctx context.Context, e *env, args []string) int {
	fs := newFlagSet(e, "elect", "[flags] NAME [--] command [args...]\n       relock elect --observe [--json] NAME", electAbout)
	rf := addRedisFlags(fs)
	f := addElectFlags(fs)
	name, argv, code, done := f.parse(e, fs, args)
	if done {
		return code
	}
	if argv != nil {
		// A command that cannot be started is refused before campaigning.
		if probe := exec.Command(argv[0]); probe.Err != nil {
			return cannotStart(e, fs, probe.Err)
		}
	}
	rdb, c, code := rf.openClient(ctx, e, fs, f.watchdog)
	if c == nil {
		return code
	}
	defer rdb.Close()
	defer c.Close()
	el := c.Election(name)
	if f.observe {
		return observeElection(ctx, e, fs, el, f.asJSON)
	}
	return lead(ctx, e, fs, el, argv, f)
}

// electFlags are relock elect's own flags.
type electFlags struct {
	value    string
	wait     optDuration
	again    bool
	grace    time.Duration
	watchdog time.Duration
	observe  bool
	asJSON   bool
}

// addElectFlags defines elect's own flags on fs, which set the electFlags
// it returns.
func addElectFlags(fs *flag.FlagSet) *electFlags {
	f := &electFlags{}
	fs.StringVar(&f.value, "value", "", "the leader's published `value` (default: host name and process id)")
	fs.Var(&f.wait, "wait", "give up if not elected within this `duration` (default: wait indefinitely)")
	fs.BoolVar(&f.again, "again", false, "campaign again after the command exits or leadership is lost")
	fs.DurationVar(&f.grace, "grace", 10*time.Second, "send the command SIGTERM this long before leadership would be lost, at most a third of the watchdog timeout; it is killed (SIGKILL) when leadership is lost")
	fs.DurationVar(&f.watchdog, "watchdog", relock.DefaultWatchdogTimeout, "watchdog timeout: how long leadership outlives relock if it dies")
	fs.BoolVar(&f.observe, "observe", false, "print each change of leader instead of running a command")
	fs.BoolVar(&f.asJSON, "json", false, "with --observe: print each change as a JSON object")
	return f
}

// parse parses elect's arguments: with --observe, flags and the election
// NAME; else, as relock run's, flags, NAME and the command, and checks the
// flags that go with a command. It returns done=true with the exit code
// when the caller should return at once.
func (f *electFlags) parse(e *env, fs *flag.FlagSet, args []string) (name string, argv []string, code int, done bool) {
	if observing(args) {
		if code, done := parse(e, fs, args); done {
			return "", nil, code, true
		}
		if fs.NArg() > 0 {
			name = fs.Arg(0)
			if code, done := parse(e, fs, fs.Args()[1:]); done {
				return "", nil, code, true
			}
		}
		if name == "" || fs.NArg() != 0 {
			return "", nil, usageError(e, fs, "--observe takes one election NAME and no command"), true
		}
		return name, nil, exitOK, false
	}
	if name, argv, code, done = parseRun(e, fs, args); done {
		return "", nil, code, true
	}
	switch {
	case f.asJSON:
		return "", nil, usageError(e, fs, "--json goes with --observe"), true
	case f.wait.set && f.wait.d == 0:
		return "", nil, usageError(e, fs, "--wait must be positive: a campaign is not one attempt"), true
	case f.grace < 0:
		return "", nil, usageError(e, fs, "--grace cannot be negative"), true
	case len(f.value) > relock.MaxValueLen:
		return "", nil, usageError(e, fs, "--value is %d bytes; the limit is %d", len(f.value), relock.MaxValueLen), true
	}
	return name, argv, exitOK, false
}

// lead campaigns in el and runs the command argv while it leads; with
// --again, it campaigns again when the command has ended, until ctx ends.
// It returns the exit code.
func lead(ctx context.Context, e *env, fs *flag.FlagSet, el *relock.Election, argv []string, f *electFlags) int {
	src := electionSource{el: el, value: f.value}
	if src.value == "" {
		src.value = defaultValue()
	}
	for {
		h, code := acquire(ctx, e, fs, src, el.Name(), optDuration{}, f.wait)
		if h == nil {
			return code
		}
		r := &runner{e: e, fs: fs, hold: h, grace: graceWithin(f.grace, f.watchdog)}
		cmd := exec.Command(argv[0], argv[1:]...)
		if cmd.Err != nil {
			r.unlock(true)
			return cannotStart(e, fs, cmd.Err)
		}
		code = r.run(cmd)
		if !f.again || ctx.Err() != nil || code == exitCannotStart {
			return code
		}
		fmt.Fprintf(e.stderr, "%s: %v ended (exit %d); campaigning again\n", fs.Name(), h, code)
	}
}

// observing reports whether args ask for --observe before any "--", so
// that its flags are parsed as such (no command follows).
func observing(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-observe", "--observe", "-observe=true", "--observe=true":
			return true
		}
	}
	return false
}

// defaultValue is a leader's value when --value is not given.
func defaultValue() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}

// electionSource campaigns in an election.
type electionSource struct {
	el    *relock.Election
	value string
}

func (s electionSource) try(ctx context.Context, opts []relock.LockOption) (hold, error) {
	return s.wait(ctx, opts)
}

func (s electionSource) wait(ctx context.Context, opts []relock.LockOption) (hold, error) {
	l, err := s.el.Campaign(ctx, s.value, opts...)
	if err != nil {
		return nil, err
	}
	return heldLeadership{l}, nil
}

func (electionSource) what() string { return "leadership of" }

type heldLeadership struct{ *relock.Leadership }

func (h heldLeadership) release(ctx context.Context) error { return h.Resign(ctx) }

func (h heldLeadership) env() []string {
	return []string{"RELOCK_ELECTION=" + h.Name(), "RELOCK_TERM=" + strconv.FormatUint(h.Term(), 10), "RELOCK_VALUE=" + h.Value()}
}

func (h heldLeadership) String() string {
	return fmt.Sprintf("leadership of %q (term %d)", h.Name(), h.Term())
}

// observeElection prints the election's leader and each change until ctx
// ends.
func observeElection(ctx context.Context, e *env, fs *flag.FlagSet, el *relock.Election, asJSON bool) int {
	if _, err := el.Leader(ctx); err != nil && !errors.Is(err, relock.ErrNoLeader) {
		if errors.Is(err, relock.ErrInvalidName) {
			return usageError(e, fs, "%v", err)
		}
		return fail(e, fs, err)
	} else if errors.Is(err, relock.ErrNoLeader) && !asJSON {
		fmt.Fprintf(e.stdout, "%s: no leader\n", el.Name())
	}
	enc := json.NewEncoder(e.stdout)
	for l := range el.Observe(ctx) {
		if asJSON {
			_ = enc.Encode(l)
			continue
		}
		fmt.Fprintln(e.stdout, describeLeader(el.Name(), l))
	}
	if s, ok := signalOf(ctx); ok {
		return signalExit(s)
	}
	if ctx.Err() != nil {
		return exitInterrupted
	}
	fmt.Fprintf(e.stderr, "%s: stopped observing %q\n", fs.Name(), el.Name())
	return exitFailure
}

// describeLeader renders a change of leader for a terminal.
func describeLeader(name string, l relock.Leader) string {
	if l.Holder == "" {
		return fmt.Sprintf("%s: term %d ended at %s; no leader", name, l.Term, l.Since.Format(time.TimeOnly))
	}
	who := fmt.Sprintf("%s pid %d %s", l.Host, l.PID, l.Program)
	if l.Client != "" {
		who += " (" + l.Client + ")"
	}
	return fmt.Sprintf("%s: term %d leader %q on %s since %s", name, l.Term, l.Value, who, l.Since.Format(time.TimeOnly))
}
