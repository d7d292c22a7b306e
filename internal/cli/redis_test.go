package cli

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/redistest"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		cluster bool
		addrs   []string // cluster seeds, or the one address
		user    string
		pass    string
		db      int
	}{
		{"standalone", "redis://127.0.0.1:6380/2", false, []string{"127.0.0.1:6380"}, "", "", 2},
		{"standalone with password", "redis://u:p@host:6379", false, []string{"host:6379"}, "u", "p", 0},
		{"cluster URL", "redis+cluster://a:7000,b:7001,c:7002", true, []string{"a:7000", "b:7001", "c:7002"}, "", "", 0},
		{"cluster URL with password", "redis+cluster://:secret@a:7000,b:7001/", true, []string{"a:7000", "b:7001"}, "", "secret", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg, err := parseTarget(tt.url, false)
			if err != nil {
				t.Fatal(err)
			}
			if tg.cluster != tt.cluster {
				t.Fatalf("cluster = %v, want %v", tg.cluster, tt.cluster)
			}
			if tt.cluster {
				if !slices.Equal(tg.multi.Addrs, tt.addrs) || tg.multi.Username != tt.user || tg.multi.Password != tt.pass {
					t.Errorf("options %v %q %q, want %v %q %q", tg.multi.Addrs, tg.multi.Username, tg.multi.Password, tt.addrs, tt.user, tt.pass)
				}
				return
			}
			o := tg.single
			if o.Addr != tt.addrs[0] || o.Username != tt.user || o.Password != tt.pass || o.DB != tt.db {
				t.Errorf("options %q %q %q %d", o.Addr, o.Username, o.Password, o.DB)
			}
		})
	}
}

func TestParseTargetClusterFlag(t *testing.T) {
	tg, err := parseTarget("redis://a:7000?addr=b:7001", true)
	if err != nil {
		t.Fatal(err)
	}
	if !tg.cluster || !slices.Equal(tg.multi.Addrs, []string{"a:7000", "b:7001"}) {
		t.Fatalf("got cluster=%v addrs %v", tg.cluster, tg.multi.Addrs)
	}
}

func TestParseTargetErrors(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		cluster bool
	}{
		{"no scheme", "localhost:6379", false},
		{"bad scheme", "http://localhost", false},
		{"cluster with database", "redis+cluster://a:1,b:2/3", false},
		{"cluster with empty host", "redis+cluster://a:1,,b:2", false},
		{"unix socket as cluster", "unix:///tmp/redis.sock", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseTarget(tt.url, tt.cluster); err == nil {
				t.Errorf("parseTarget(%q) succeeded", tt.url)
			}
		})
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"redis://u:secret@h:1", "redis://u:xxxxx@h:1"},
		{"redis://:secret@h:1/0", "redis://:xxxxx@h:1/0"},
		{"redis://h:1", "redis://h:1"},
		{"redis://u@h:1", "redis://u@h:1"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if got := redact(tt.in); got != tt.want {
				t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseTargetSentinel(t *testing.T) {
	tg, err := parseTarget("redis+sentinel://u:p@s1:26379,s2:26380/mymaster/3?sentinel_password=sp&dial_timeout=2s", false)
	if err != nil {
		t.Fatal(err)
	}
	o := tg.failover
	if o == nil || o.MasterName != "mymaster" || !slices.Equal(o.SentinelAddrs, []string{"s1:26379", "s2:26380"}) ||
		o.Username != "u" || o.Password != "p" || o.SentinelPassword != "sp" || o.DB != 3 || o.DialTimeout != 2*time.Second {
		t.Fatalf("options %+v", o)
	}
	if tg.String() != `master "mymaster" of Sentinels s1:26379,s2:26380` || strings.Contains(tg.String(), "p@") {
		t.Errorf("String() = %q", tg.String())
	}
	for _, bad := range []string{
		"redis+sentinel://s1:26379",       // no master name
		"redis+sentinel://s1:26379,/m",    // empty host
		"redis+sentinel:///m",             // no host
		"redis+sentinel://s1:26379/m/x",   // bad db
		"redis+sentinel://s1:26379/m?x=1", // unknown parameter
	} {
		if _, err := parseTarget(bad, false); err == nil {
			t.Errorf("parseTarget(%q) succeeded", bad)
		}
	}
	if _, err := parseTarget("redis+sentinel://s1:26379/m", true); err == nil {
		t.Errorf("--cluster with a Sentinel URL was accepted")
	}
}

// TestRunOnSentinel: relock run reaches the master through Sentinels given
// by a redis+sentinel:// URL, and the lock it takes is on that master.
func TestRunOnSentinel(t *testing.T) {
	needCommand(t, "sh")
	s := redistest.NewSentinel(t)
	url := "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.MasterName
	r := relockCmd(t, "run", "--redis", url, "job", "--", "sh", "-c", `echo "$RELOCK_LOCK"`)
	if r.code != exitOK || strings.TrimSpace(r.stdout) != "job" {
		t.Fatalf("exit %d, stdout %q; want 0 and job", r.code, r.stdout)
	}
	held := relockCmd(t, "show", "--redis", url, "job")
	if held.code != exitOK || !strings.Contains(held.stdout, "free") {
		t.Fatalf("show: exit %d, stdout %q; want the lock free after the run", held.code, held.stdout)
	}
}
