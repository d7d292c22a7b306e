package cli

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/relock-go/relock/internal/layout"
)

// Two Clients' uuids, for holds written by hand.
const (
	uuidA = "3d80591e-b910-4177-9960-909de4858747"
	uuidB = "9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b"
)

// fixedNow is the server's clock in tests that stop it; the holds they
// write began before it.
var fixedNow = time.UnixMilli(1_700_000_000_000)

// identifyA writes the identity hash of uuidA's Client, so that its holds
// name it: "db1 pid 42 worker (billing)".
func identifyA(mr *miniredis.Miniredis) {
	mr.HSet(layout.ClientKey(uuidA), "host", "db1", "pid", "42", "program", "worker",
		"version", "v1.2.0", "started", "2027-01-15T08:00:00Z", "name", "billing")
}

// permitOfA returns the raw id of uuidA's Client's n-th relock permit.
func permitOfA(n byte) string {
	raw, _ := hex.DecodeString(strings.ReplaceAll(uuidA, "-", ""))
	return string(raw) + "\x00\x00\x00\x00\x00\x00\x00" + string([]byte{n})
}

// subscriber returns a function that subscribes to a channel on mr until
// the test ends.
func subscriber(t *testing.T, mr *miniredis.Miniredis) func(channel string) {
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	return func(channel string) {
		ps := rdb.Subscribe(context.Background(), channel)
		t.Cleanup(func() { ps.Close() })
		if _, err := ps.Receive(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestShowOutput pins what show prints, in text and as JSON, for each
// state a name can be in: every line, in order, padded as printed. The
// states are written into Redis by hand, with the server's clock stopped,
// so that TTLs, deadlines and waiting times are exact.
func TestShowOutput(t *testing.T) {
	ms := fixedNow.UnixMilli()
	tests := []struct {
		name   string
		show   string
		setup  func(mr *miniredis.Miniredis, sub func(channel string))
		code   int
		text   string
		asJSON string
	}{
		{
			name: "lock held, calls queued",
			show: "orders",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				identifyA(mr)
				mr.HSet("orders", uuidA+":1", "2", layout.TokenField, "7", layout.SinceField, strconv.FormatInt(ms-90_000, 10))
				mr.SetTTL("orders", 25*time.Second)
				mr.ZAdd(layout.Companion(layout.LockQueue, "orders"), float64(ms-1500), "30000|L|"+uuidB+":3")
				mr.ZAdd(layout.Companion(layout.LockQueue, "orders"), float64(ms-200), "30000|L|"+uuidA+":4")
				sub(layout.Companion(layout.LockChannel, "orders"))
			},
			code: exitOK,
			text: `name      orders
state     held
ttl       25s
since     SINCE  (held for D)
holder    db1 pid 42 worker (billing)  3d80591e-b910-4177-9960-909de4858747:1 (holds 2)
                                       relock v1.2.0, started 2027-01-15T08:00:00Z
token     7                            (the holder's fencing token)
queued 1  unknown client               9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:3 (waiting for 1.5s)
queued 2  db1 pid 42 worker (billing)  3d80591e-b910-4177-9960-909de4858747:4 (waiting for 200ms)
waiters   3                            (calls queued in relock_lock_queue:{orders} and subscribers of redisson_lock__channel:{orders} but not of relock_watch:{orders} (the holder's watch))
`,
			asJSON: `{"name":"orders","state":"held","kind":"lock","ttl_ms":25000,"holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:1","count":2,"client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"}}],"token":"7","waiters":3,"waiters_counted":"calls queued in relock_lock_queue:{orders} and subscribers of redisson_lock__channel:{orders} but not of relock_watch:{orders} (the holder's watch)","queue":[{"owner":"9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:3","waiting_ms":1500},{"owner":"3d80591e-b910-4177-9960-909de4858747:4","client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"},"waiting_ms":200}],"since":"2023-11-14T22:11:50Z"}`,
		},
		{
			name: "read-write lock read by two, a writer queued",
			show: "files",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.HSet("files", "mode", "read", uuidA+":1", "1", uuidB+":2", "3")
				mr.ZAdd(layout.Companion(layout.RWQueue, "files"), float64(ms-40), "30000|W|"+uuidB+":5")
				mr.ZAdd(layout.Companion(layout.RWQueue, "files"), float64(ms-30), "30000|R|"+uuidA+":6")
				sub(layout.Companion(layout.RWChannel, "files"))
			},
			code: exitOK,
			text: `name      files
state     held (read-write lock, read mode)
ttl       none
holder    unknown client  3d80591e-b910-4177-9960-909de4858747:1 (holds 1)
holder    unknown client  9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:2 (holds 3)
queued 1  unknown client  9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:5 (waiting for 40ms, to write)
queued 2  unknown client  3d80591e-b910-4177-9960-909de4858747:6 (waiting for 30ms, to read)
waiters   1               (subscribers of redisson_rwlock:{files})
`,
			asJSON: `{"name":"files","state":"held","kind":"read","ttl_ms":-1,"holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:1","count":1},{"owner":"9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:2","count":3}],"waiters":1,"waiters_counted":"subscribers of redisson_rwlock:{files}","queue":[{"owner":"9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:5","mode":"write","waiting_ms":40},{"owner":"3d80591e-b910-4177-9960-909de4858747:6","mode":"read","waiting_ms":30}]}`,
		},
		{
			name: "read-write lock written",
			show: "files",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.HSet("files", "mode", "write", uuidA+":1:write", "2")
				mr.SetTTL("files", 800*time.Millisecond)
			},
			code: exitOK,
			text: `name     files
state    held (read-write lock, write mode)
ttl      800ms
holder   unknown client  3d80591e-b910-4177-9960-909de4858747:1 (holds 2, write)
waiters  0               (subscribers of redisson_rwlock:{files})
`,
			asJSON: `{"name":"files","state":"held","kind":"write","ttl_ms":800,"holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:1","count":2,"write":true}],"waiters":0,"waiters_counted":"subscribers of redisson_rwlock:{files}"}`,
		},
		{
			name: "fair lock held, owners queued",
			show: "fair",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				identifyA(mr)
				mr.HSet("fair", uuidB+":1", "1")
				mr.SetTTL("fair", 5*time.Second)
				mr.Push(layout.Companion(layout.FairQueue, "fair"), uuidA+":2", uuidB+":3")
				mr.ZAdd(layout.Companion(layout.FairTimeout, "fair"), float64(ms+60_000), uuidA+":2")
				mr.ZAdd(layout.Companion(layout.FairTimeout, "fair"), float64(ms+65_000), uuidB+":3")
				mr.HSet(layout.Companion(layout.FairAlive, "fair"), uuidA+":2", strconv.FormatInt(ms+3000, 10)+":30000")
			},
			code: exitOK,
			text: `name      fair
state     held (fair lock)
ttl       5s
holder    unknown client               9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:1 (holds 1)
queued 1  db1 pid 42 worker (billing)  3d80591e-b910-4177-9960-909de4858747:2 (keeps its place for 3s)
queued 2  unknown client               9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:3 (keeps its place for 1m5s)
waiters   2                            (owners queued in redisson_lock_queue:{fair})
`,
			asJSON: `{"name":"fair","state":"held","kind":"fair","ttl_ms":5000,"holders":[{"owner":"9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:1","count":1}],"waiters":2,"waiters_counted":"owners queued in redisson_lock_queue:{fair}","queue":[{"owner":"3d80591e-b910-4177-9960-909de4858747:2","client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"},"deadline_in_ms":3000},{"owner":"9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:3","deadline_in_ms":65000}]}`,
		},
		{
			name: "election held, no leader published",
			show: "jobs",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.HSet(electionKey("jobs"), uuidA+":1", "1")
				mr.SetTTL(electionKey("jobs"), 30*time.Second)
			},
			code: exitOK,
			text: `name     jobs
state    held (election)
leader   none published yet
ttl      30s
holder   unknown client  3d80591e-b910-4177-9960-909de4858747:1 (holds 1)
waiters  0               (owners queued in redisson_lock_queue:relock_election:{jobs})
`,
			asJSON: `{"name":"jobs","state":"held","kind":"election","ttl_ms":30000,"holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:1","count":1}],"waiters":0,"waiters_counted":"owners queued in redisson_lock_queue:relock_election:{jobs}"}`,
		},
		{
			name: "election with its leader",
			show: "jobs",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				rec := `{"holder":"` + uuidA + `:1","value":"node-a","term":3,"host":"db1","pid":42,"program":"worker","since":` + strconv.FormatInt(ms-5000, 10) + `}`
				mr.HSet(electionKey("jobs"), uuidA+":1", "1", layout.LeaderField, rec, layout.LeaderHolderField, uuidA+":1", layout.TokenField, "3")
				mr.SetTTL(electionKey("jobs"), 30*time.Second)
				mr.Push(layout.Companion(layout.FairQueue, electionKey("jobs")), uuidB+":1")
				mr.ZAdd(layout.Companion(layout.FairTimeout, electionKey("jobs")), float64(ms+10_000), uuidB+":1")
			},
			code: exitOK,
			text: `name      jobs
state     held (election)
leader    "node-a"  term 3 since 2023-11-14T22:13:15Z
ttl       30s
holder    unknown client  3d80591e-b910-4177-9960-909de4858747:1 (holds 1)
token     3               (the holder's fencing token)
queued 1  unknown client  9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:1 (keeps its place for 10s)
waiters   1               (owners queued in redisson_lock_queue:relock_election:{jobs})
`,
			asJSON: `{"name":"jobs","state":"held","kind":"election","ttl_ms":30000,"holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:1","count":1}],"token":"3","waiters":1,"waiters_counted":"owners queued in redisson_lock_queue:relock_election:{jobs}","queue":[{"owner":"9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:1","deadline_in_ms":10000}],"leader":{"value":"node-a","term":3,"holder":"3d80591e-b910-4177-9960-909de4858747:1","host":"db1","pid":42,"program":"worker","since":"2023-11-14T22:13:15Z"}}`,
		},
		{
			name: "permit semaphore",
			show: "pool",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				identifyA(mr)
				mr.Set("pool", "1")
				mr.ZAdd(layout.PermitTimeouts("pool"), float64(ms+4000), permitOfA(7))
				mr.ZAdd(layout.PermitTimeouts("pool"), float64(layout.PermitNoLease), "0123456789abcdef")
				mr.ZAdd(layout.Companion(layout.PermitQueue, "pool"), float64(ms-700), "30000|P|"+uuidB+":9")
				sub(layout.Companion(layout.SemaphoreChannel, "pool"))
			},
			code: exitOK,
			text: `name       pool
kind       permit-semaphore
available  1
held       2
permit     3d80591eb91041779960909de48587470000000000000007  db1 pid 42 worker (billing) 3d80591e-b910-4177-9960-909de4858747:7, expires in 4s
permit     30313233343536373839616263646566                  unknown client, no lease
queued 1   unknown client                                    9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:9 (waiting for 700ms)
waiters    1                                                 (subscribers of redisson_sc:{pool})
`,
			asJSON: `{"name":"pool","state":"count","kind":"permit-semaphore","holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:7","count":1,"client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"},"permit":"3d80591eb91041779960909de48587470000000000000007"},{"owner":"30313233343536373839616263646566","count":1,"permit":"30313233343536373839616263646566"}],"waiters":1,"waiters_counted":"subscribers of redisson_sc:{pool}","queue":[{"owner":"9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:9","waiting_ms":700}],"count":1,"permits":[{"id":"3d80591eb91041779960909de48587470000000000000007","owner":"3d80591e-b910-4177-9960-909de4858747:7","client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"},"expires_in_ms":4000},{"id":"30313233343536373839616263646566"}]}`,
		},
		{
			name: "semaphore waited on",
			show: "sem",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.Set("sem", "0")
				sub(layout.Companion(layout.SemaphoreChannel, "sem"))
			},
			code: exitOK,
			text: `name       sem
kind       semaphore
available  0
holders    none recorded: a semaphore's permits have no owner
waiters    1  (subscribers of redisson_sc:{sem})
`,
			asJSON: `{"name":"sem","state":"count","kind":"semaphore","holders":[],"waiters":1,"waiters_counted":"subscribers of redisson_sc:{sem}","count":0}`,
		},
		{
			name: "latch waited on",
			show: "gate",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.Set("gate", "2")
				sub(layout.LatchChannel("gate", false))
			},
			code: exitOK,
			text: `name     gate
kind     latch
count    2
waiters  1  (subscribers of redisson_countdownlatch__channel__{gate})
`,
			asJSON: `{"name":"gate","state":"count","kind":"latch","holders":[],"waiters":1,"waiters_counted":"subscribers of redisson_countdownlatch__channel__{gate}","count":2}`,
		},
		{
			name: "semaphore or latch nobody waits on",
			show: "n",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.Set("n", "5")
			},
			code: exitOK,
			text: `name     n
kind     semaphore-or-latch
value    5  (a semaphore's available permits or a latch's count: nobody waits to tell which)
waiters  0  (subscribers of redisson_sc:{n} and of redisson_countdownlatch__channel__{n})
`,
			asJSON: `{"name":"n","state":"count","kind":"semaphore-or-latch","holders":[],"waiters":0,"waiters_counted":"subscribers of redisson_sc:{n} and of redisson_countdownlatch__channel__{n}","count":5}`,
		},
		{
			name: "free, tokens handed out before",
			show: "orders",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.Set(layout.Companion(layout.Token, "orders"), "12")
			},
			code: exitOK,
			text: `name     orders
state    free
token    12  (redisson_lock_token:{orders}, the last handed out)
waiters  0   (calls queued in relock_lock_queue:{orders} and subscribers of redisson_lock__channel:{orders} but not of relock_watch:{orders} (the holder's watch))
`,
			asJSON: `{"name":"orders","state":"free","kind":"none","holders":[],"token":"12","token_key":"redisson_lock_token:{orders}","waiters":0,"waiters_counted":"calls queued in relock_lock_queue:{orders} and subscribers of redisson_lock__channel:{orders} but not of relock_watch:{orders} (the holder's watch)"}`,
		},
		{
			name: "free fair lock, owners queued",
			show: "fair",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.Push(layout.Companion(layout.FairQueue, "fair"), uuidA+":2")
				mr.ZAdd(layout.Companion(layout.FairTimeout, "fair"), float64(ms+2500), uuidA+":2")
			},
			code: exitOK,
			text: `name      fair
state     free (fair lock with owners queued)
queued 1  unknown client  3d80591e-b910-4177-9960-909de4858747:2 (keeps its place for 2.5s)
waiters   1               (owners queued in redisson_lock_queue:{fair})
`,
			asJSON: `{"name":"fair","state":"free","kind":"fair","holders":[],"waiters":1,"waiters_counted":"owners queued in redisson_lock_queue:{fair}","queue":[{"owner":"3d80591e-b910-4177-9960-909de4858747:2","deadline_in_ms":2500}]}`,
		},
		{
			name: "a list",
			show: "todo",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.Push("todo", "x")
			},
			code: exitFailure,
			text: `name     todo
state    not a lock: the key holds a list
waiters  0  (calls queued in relock_lock_queue:{todo} and subscribers of redisson_lock__channel:{todo} but not of relock_watch:{todo} (the holder's watch))
`,
			asJSON: `{"name":"todo","state":"not-a-lock","kind":"list","holders":[],"waiters":0,"waiters_counted":"calls queued in relock_lock_queue:{todo} and subscribers of redisson_lock__channel:{todo} but not of relock_watch:{todo} (the holder's watch)"}`,
		},
		{
			name: "a hash of other fields",
			show: "user",
			setup: func(mr *miniredis.Miniredis, sub func(string)) {
				mr.HSet("user", "name", "x")
			},
			code: exitFailure,
			text: `name     user
state    not a lock: the key holds a hash whose fields are not lock owners
waiters  0  (calls queued in relock_lock_queue:{user} and subscribers of redisson_lock__channel:{user} but not of relock_watch:{user} (the holder's watch))
`,
			asJSON: `{"name":"user","state":"not-a-lock","kind":"hash whose fields are not lock owners","holders":[],"waiters":0,"waiters_counted":"calls queued in relock_lock_queue:{user} and subscribers of redisson_lock__channel:{user} but not of relock_watch:{user} (the holder's watch)"}`,
		},
	}
	// show prints when a hold began in the local time zone, padded to its
	// length, and for how long it has lasted by the local clock.
	since := time.UnixMilli(ms - 90_000).Format(time.RFC3339)
	sinceLine := regexp.MustCompile(`(?m)^since +` + regexp.QuoteMeta(since) + ` +\(held for [^)]*\)$`)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mr, url := server(t)
			mr.SetTime(fixedNow)
			tt.setup(mr, subscriber(t, mr))

			r := relockCmd(t, "show", "--redis", url, tt.show)
			text := sinceLine.ReplaceAllString(r.stdout, "since     SINCE  (held for D)")
			if r.code != tt.code || text != tt.text {
				t.Errorf("show: exit %d, stdout\n%s\nwant exit %d, stdout\n%s", r.code, text, tt.code, tt.text)
			}
			r = relockCmd(t, "show", "--redis", url, "--json", tt.show)
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(r.stdout)); err != nil {
				t.Fatalf("show --json: %v\n%s", err, r.stdout)
			}
			if r.code != tt.code || compact.String() != tt.asJSON {
				t.Errorf("show --json: exit %d, stdout\n%s\nwant exit %d, stdout\n%s", r.code, compact.String(), tt.code, tt.asJSON)
			}
		})
	}
}
