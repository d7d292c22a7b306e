package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/relock-go/relock/internal/layout"
)

// TestLsOutput pins what ls prints, in text and as JSON, of a keyspace
// that holds every kind of object it lists and some it must leave out,
// written by hand with the server's clock stopped.
func TestLsOutput(t *testing.T) {
	mr, url := server(t)
	mr.SetTime(fixedNow)
	ms := fixedNow.UnixMilli()
	sub := subscriber(t, mr)
	identifyA(mr)
	mr.HSet("orders", uuidA+":1", "2", layout.TokenField, "7")
	mr.SetTTL("orders", 25*time.Second)
	mr.ZAdd(layout.Companion(layout.LockQueue, "orders"), float64(ms-1500), "30000|L|"+uuidB+":3")
	mr.HSet("files", "mode", "read", uuidA+":1", "1", uuidB+":2", "3")
	sub(layout.Companion(layout.RWChannel, "files"))
	mr.HSet("fair", uuidB+":1", "1")
	mr.SetTTL("fair", 5*time.Second)
	mr.Push(layout.Companion(layout.FairQueue, "fair"), uuidA+":2")
	rec := `{"holder":"` + uuidA + `:1","value":"node-a","term":3,"since":` + strconv.FormatInt(ms-5000, 10) + `}`
	mr.HSet(electionKey("jobs"), uuidA+":1", "1", layout.LeaderField, rec, layout.LeaderHolderField, uuidA+":1")
	mr.SetTTL(electionKey("jobs"), 30*time.Second)
	mr.Set("pool", "1")
	mr.ZAdd(layout.PermitTimeouts("pool"), float64(ms+4000), permitOfA(7))
	mr.ZAdd(layout.PermitTimeouts("pool"), float64(layout.PermitNoLease), "0123456789abcdef")
	sub(layout.Companion(layout.SemaphoreChannel, "pool"))
	mr.Set("sem", "0")
	sub(layout.Companion(layout.SemaphoreChannel, "sem"))
	sub(layout.Companion(layout.SemaphoreChannel, "sem"))
	mr.Set("gate", "2")
	sub(layout.LatchChannel("gate", false))
	mr.Set("idle", "5")                                   // a counter nobody waits on: left to show
	mr.HSet("user", "name", "x")                          // not a lock
	mr.Set(layout.Companion(layout.Token, "orders"), "7") // a fencing counter
	mr.HSet(layout.Companion(layout.FairAlive, "fair"), uuidA+":2", strconv.FormatInt(ms+3000, 10)+":30000")
	// A read-write lock with more readers than one HSCAN returns.
	big := []string{"mode", "read"}
	for i := range 2 * hscanCount {
		big = append(big, uuidA+":"+strconv.Itoa(100+i), "1")
	}
	mr.HSet("big", big...)

	bigOwners := strings.TrimSuffix(strings.Repeat("db1 pid 42 worker (billing), ", 2*hscanCount), ", ")
	at := regexp.MustCompile(`,"at":"[^"]*"`)
	tests := []struct {
		args   []string
		stdout string
	}{
		{[]string{"--match", "[^b]*"}, `NAME    KIND              TTL   HELD  HOLDS  OWNERS
fair    fair              5s    -     1      unknown client 9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:1
files   read              none  -     4      db1 pid 42 worker (billing), unknown client 9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:2 ×3
gate    latch             -     -     0      count 2
jobs    election          30s   -     1      db1 pid 42 worker (billing); leader "node-a", term 3, since 2023-11-14T22:13:15Z
orders  lock              25s   -     2      db1 pid 42 worker (billing) ×2
pool    permit-semaphore  -     -     2      available 1, held 2: unknown client 30313233343536373839616263646566, db1 pid 42 worker (billing)
sem     semaphore         -     -     0      available 0
`},
		{[]string{"--match", "[^b]*", "--ids"}, `NAME    KIND              TTL   HELD  HOLDS  OWNERS
fair    fair              5s    -     1      unknown client 9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:1
files   read              none  -     4      db1 pid 42 worker (billing) 3d80591e-b910-4177-9960-909de4858747:1, unknown client 9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:2 ×3
gate    latch             -     -     0      count 2
jobs    election          30s   -     1      db1 pid 42 worker (billing) 3d80591e-b910-4177-9960-909de4858747:1; leader "node-a", term 3, since 2023-11-14T22:13:15Z
orders  lock              25s   -     2      db1 pid 42 worker (billing) 3d80591e-b910-4177-9960-909de4858747:1 ×2
pool    permit-semaphore  -     -     2      available 1, held 2: unknown client 30313233343536373839616263646566, db1 pid 42 worker (billing) 3d80591e-b910-4177-9960-909de4858747:7
sem     semaphore         -     -     0      available 0
`},
		// The JSON leaves the latch out: ls counts its waiters on both forms
		// of its channel's name, which outside a cluster are one name, so
		// each twice.
		{[]string{"--match", "[^bg]*", "--json"}, `{"match":"[^bg]*","locks":[{"name":"fair","kind":"fair","ttl_ms":5000,"holds":1,"holders":[{"owner":"9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:1","count":1}],"waiting_clients":1},{"name":"files","kind":"read","ttl_ms":-1,"holds":4,"holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:1","count":1,"client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"}},{"owner":"9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:2","count":3}],"waiting_clients":1},{"name":"jobs","kind":"election","ttl_ms":30000,"holds":1,"holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:1","count":1,"client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"}}],"waiting_clients":0,"leader":{"value":"node-a","term":3,"holder":"3d80591e-b910-4177-9960-909de4858747:1","since":"2023-11-14T22:13:15Z"}},{"name":"orders","kind":"lock","ttl_ms":25000,"holds":2,"holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:1","count":2,"client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"}}],"token":"7","waiting_clients":1},{"name":"pool","kind":"permit-semaphore","ttl_ms":-1,"holds":2,"holders":[{"owner":"30313233343536373839616263646566","count":1,"permit":"30313233343536373839616263646566"},{"owner":"3d80591e-b910-4177-9960-909de4858747:7","count":1,"client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"},"permit":"3d80591eb91041779960909de48587470000000000000007"}],"waiting_clients":1,"count":1},{"name":"sem","kind":"semaphore","ttl_ms":-1,"holds":0,"holders":[],"waiting_clients":2,"count":0}]}`},
		{[]string{"--match", "f*"}, `NAME   KIND  TTL   HELD  HOLDS  OWNERS
fair   fair  5s    -     1      unknown client 9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:1
files  read  none  -     4      db1 pid 42 worker (billing), unknown client 9a1c2f3e-0b4d-4e5f-8a6b-7c8d9e0f1a2b:2 ×3
`},
		{[]string{"--kind", "election", "--json"}, `{"match":"*","kind":"election","locks":[{"name":"jobs","kind":"election","ttl_ms":30000,"holds":1,"holders":[{"owner":"3d80591e-b910-4177-9960-909de4858747:1","count":1,"client":{"host":"db1","pid":"42","program":"worker","version":"v1.2.0","started":"2027-01-15T08:00:00Z","name":"billing"}}],"waiting_clients":0,"leader":{"value":"node-a","term":3,"holder":"3d80591e-b910-4177-9960-909de4858747:1","since":"2023-11-14T22:13:15Z"}}]}`},
		{[]string{"--match", "big"}, "NAME  KIND  TTL   HELD  HOLDS  OWNERS\nbig   read  none  -     " + strconv.Itoa(2*hscanCount) + "    " + bigOwners + "\n"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := relockCmd(t, append([]string{"ls", "--redis", url}, tt.args...)...)
			stdout := r.stdout
			if strings.Contains(strings.Join(tt.args, " "), "--json") {
				var compact bytes.Buffer
				if err := json.Compact(&compact, []byte(r.stdout)); err != nil {
					t.Fatalf("%v\n%s", err, r.stdout)
				}
				stdout = at.ReplaceAllString(compact.String(), "")
			}
			if r.code != exitOK || stdout != tt.stdout || r.stderr != "" {
				t.Errorf("exit %d, stderr %q, stdout\n%s\nwant exit 0, stdout\n%s", r.code, r.stderr, stdout, tt.stdout)
			}
		})
	}
}
