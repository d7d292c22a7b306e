package scripts

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverCPU returns the server's CPU time so far (user and system), from
// INFO cpu.
func serverCPU(b *testing.B) time.Duration {
	b.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	var sum float64
	for _, line := range strings.Split(info, "\r\n") {
		name, v, ok := strings.Cut(line, ":")
		if ok && (name == "used_cpu_sys" || name == "used_cpu_user") {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				b.Fatal(err)
			}
			sum += f
		}
	}
	return time.Duration(sum * float64(time.Second))
}

// BenchmarkUncontendedCycle measures what an uncontended lock and unlock
// of the Mutex's scripts cost the server, as a Client sends them: one-shot
// owners, each on its own name, 16 locks in one pipeline and then their 16
// unlocks. It reports the server's CPU time per cycle (server-µs/cycle),
// which covers reading and writing the connection too; "return-at-once"
// sends the same keys and arguments to scripts that return at once, the
// part of that cost the scripts' bodies do not make.
func BenchmarkUncontendedCycle(b *testing.B) {
	ctx := context.Background()
	const depth = 16
	const owner = "f1fb68c1-6fe4-4f69-9cb2-8f426e845bbd:1"
	lock := func(name string) ([]string, []any) {
		keys := lockKeys(name, "")
		return keys, []any{30000, owner, counterOnly, "o", time.Now().UnixMilli()}
	}
	unlock := func(name string) ([]string, []any) {
		return lockKeys(name, ""), []any{owner, "publish", counterOnly, clientGrants("f1fb68c1-6fe4-4f69-9cb2-8f426e845bbd"), "1", lockChannel(name)}
	}
	nothing := redis.NewScript("return 1")
	type runner func(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd
	relock := func(s *Script) runner {
		return func(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
			return s.Run(ctx, c.(Runner), Keys(keys...), args...)
		}
	}
	for _, c := range []struct {
		name         string
		lock, unlock runner
	}{
		{"scripts", relock(Lock), relock(Unlock)},
		{"whole-libraries", relock(whole("lock", "clock", "fence", "queue", "lockhash")), relock(whole("unlock", "clock", "fence", "queue"))},
		{"return-at-once", nothing.Run, nothing.Run},
	} {
		steps := []struct {
			run  runner
			argv func(string) ([]string, []any)
		}{{c.lock, lock}, {c.unlock, unlock}}
		b.Run(c.name, func(b *testing.B) {
			// Load the scripts, so that no NOSCRIPT round is measured.
			for _, step := range steps {
				keys, args := step.argv("bench:cycle:warm")
				if err := step.run(ctx, rdb, keys, args...).Err(); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			before := serverCPU(b)
			for i := 0; i < b.N; i += depth {
				for _, step := range steps {
					pipe := rdb.Pipeline()
					for j := i; j < i+depth; j++ {
						keys, args := step.argv("bench:cycle:" + strconv.Itoa(j))
						step.run(ctx, pipe, keys, args...)
					}
					cmds, err := pipe.Exec(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if v, _ := cmds[0].(*redis.Cmd).Int64(); v <= 0 {
						b.Fatalf("reply %d: the cycle was not uncontended", v)
					}
				}
			}
			spent := serverCPU(b) - before
			b.StopTimer()
			cycles := (b.N + depth - 1) / depth * depth
			b.ReportMetric(float64(spent.Microseconds())/float64(cycles), "server-µs/cycle")
		})
	}
}

// whole returns the script name with the library files libs put whole
// between its header and its body, every declaration of them made on
// each call: what loadWith's leaving out of unused declarations saves is
// the difference from the script loadWith makes.
func whole(name string, libs ...string) *Script {
	b, err := files.ReadFile(name + ".lua")
	if err != nil {
		panic(err)
	}
	header, body, _ := strings.Cut(string(b), "\n\n")
	src := header + "\n\n"
	for _, lib := range libs {
		l, err := files.ReadFile(lib + ".lua")
		if err != nil {
			panic(err)
		}
		src += string(l) + "\n"
	}
	src += body
	sum := sha1.Sum([]byte(src))
	s := &Script{name: name, src: src, sha: hex.EncodeToString(sum[:])}
	s.shaArg, s.srcArg = s.sha, s.src
	return s
}
