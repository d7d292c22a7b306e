package cli

import (
	"strings"
	"testing"
)

// TestConnectionFlagsBeforeCommand: the connection flags may come before
// the command, in both the "--redis URL" and the "--redis=URL" forms, and
// mean what they mean after it (where one given after the command wins);
// an unknown flag before the command is a short usage error.
func TestConnectionFlagsBeforeCommand(t *testing.T) {
	srv, url := realServer(t)
	lock(t, realClient(t, srv), "orders:1")

	for _, args := range [][]string{
		{"--redis", url, "ls"},
		{"--redis=" + url, "ls"},
		{"-redis", url, "ls", "--json"},
		{"--redis", "redis://127.0.0.1:1", "ls", "--redis", url},
		{"--redis", url, "show", "orders:1"},
	} {
		r := relockCmd(t, args...)
		if r.code != exitOK || !strings.Contains(r.stdout, "orders:1") {
			t.Errorf("relock %s: exit %d, stdout %q; want orders:1 listed", strings.Join(args, " "), r.code, r.stdout)
		}
	}

	// --cluster reaches the command, which finds it does not fit the URL.
	r := relockCmd(t, "--cluster", "--redis", "unix:///nowhere.sock", "ls")
	if r.code != exitUsage || !strings.Contains(r.stderr, "--cluster needs") {
		t.Errorf("--cluster before ls: exit %d, stderr %q; want the command's --cluster error", r.code, r.stderr)
	}

	// Commands that do not talk to Redis take them too, as an alias that
	// always names the server would give them.
	if r := relockCmd(t, "--redis", url, "version"); r.code != exitOK || !strings.HasPrefix(r.stdout, "relock ") {
		t.Errorf("--redis URL version: exit %d, stdout %q", r.code, r.stdout)
	}
	if r := relockCmd(t, "--redis", url, "help", "ls"); r.code != exitOK || !strings.Contains(r.stdout, "Usage: relock ls") {
		t.Errorf("--redis URL help ls: exit %d, stdout %q", r.code, r.stdout)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--verbose", "ls"}, "-verbose"},
		{[]string{"--redis"}, "needs an argument"},
		{[]string{"--redis", url}, "no command"},
	} {
		r := relockCmd(t, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.stderr, tc.want) || !strings.Contains(r.stderr, "--redis") {
			t.Errorf("relock %s: exit %d, stderr %q; want exit %d and %q, naming --redis", strings.Join(tc.args, " "), r.code, r.stderr, exitUsage, tc.want)
		}
		if strings.Contains(r.stderr, "Commands:") {
			t.Errorf("relock %s printed the whole help: %q", strings.Join(tc.args, " "), r.stderr)
		}
	}
}
