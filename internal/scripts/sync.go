package scripts

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// The synchronizers' scripts: Semaphore (Redisson's RSemaphore layout),
// PermitSemaphore (RPermitExpirableSemaphore) and CountDownLatch
// (RCountDownLatch). Each file's header names its KEYS, ARGV and return
// values. The permit semaphore's scripts have the functions of
// psem_lib.lua put between their header and their body.
var (
	SemAcquire       = load("sem_acquire")
	SemUndo          = load("sem_undo")
	SemRelease       = load("sem_release")
	SemTrySetPermits = load("sem_trysetpermits")
	SemDrain         = load("sem_drain")

	PermitAcquire     = loadPermit("psem_acquire")
	PermitRelease     = loadPermit("psem_release")
	PermitAvailable   = loadPermit("psem_available")
	PermitUpdateLease = loadPermit("psem_updatelease")
	PermitRenew       = loadPermit("psem_renew")

	LatchTrySetCount = load("latch_trysetcount")
	LatchCountDown   = load("latch_countdown")
)

// SyncScripts lists the synchronizers' scripts, for tests.
var SyncScripts = []*Script{
	SemAcquire, SemUndo, SemRelease, SemTrySetPermits, SemDrain,
	PermitAcquire, PermitRelease, PermitAvailable, PermitUpdateLease, PermitRenew,
	LatchTrySetCount, LatchCountDown,
}

// loadPermit loads a permit semaphore script with psem_lib.lua's functions
// inserted after its header, so that its source still begins with it.
func loadPermit(name string) *Script {
	lib, err := files.ReadFile("psem_lib.lua")
	if err != nil {
		panic("scripts: missing embedded file psem_lib.lua")
	}
	s := load(name)
	header, body, ok := strings.Cut(s.src, "\n\n")
	if !ok {
		panic("scripts: " + name + ".lua has no header")
	}
	s.src = header + "\n\n" + string(lib) + "\n" + body
	sum := sha1.Sum([]byte(s.src))
	s.sha = hex.EncodeToString(sum[:])
	return s
}
