package scripts

// The synchronizers' scripts: Semaphore (Redisson's RSemaphore layout),
// PermitSemaphore (RPermitExpirableSemaphore) and CountDownLatch
// (RCountDownLatch). Each file's header names its KEYS, ARGV and return
// values. The permit semaphore's scripts have the functions of clock.lua
// and permit_lib.lua put between their header and their body.
var (
	SemAcquire       = loadWith("sem_acquire", "request")
	SemUndo          = load("sem_undo")
	SemRelease       = loadWith("sem_release", "request")
	SemTrySetPermits = loadWith("sem_trysetpermits", "request", "tryset")
	SemDrain         = loadWith("sem_drain", "request")

	PermitAcquire     = loadPermit("permit_acquire")
	PermitRelease     = loadPermit("permit_release")
	PermitAvailable   = loadPermit("permit_available")
	PermitUpdateLease = loadPermit("permit_updatelease")
	PermitRenew       = loadPermit("permit_renew")

	LatchTrySetCount = loadWith("latch_trysetcount", "request", "tryset")
	LatchCountDown   = loadWith("latch_countdown", "request")
)

// SynchronizerScripts lists the synchronizers' scripts, for tests.
var SynchronizerScripts = []*Script{
	SemAcquire, SemUndo, SemRelease, SemTrySetPermits, SemDrain,
	PermitAcquire, PermitRelease, PermitAvailable, PermitUpdateLease, PermitRenew,
	LatchTrySetCount, LatchCountDown,
}

func loadPermit(name string) *Script { return loadWith(name, "clock", "queue", "permit_lib") }
