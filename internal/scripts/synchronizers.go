package scripts

// The synchronizers' scripts: Semaphore (Redisson's RSemaphore layout),
// PermitSemaphore (RPermitExpirableSemaphore) and CountDownLatch
// (RCountDownLatch). Each file's header names its KEYS, ARGV and return
// values. The permit semaphore's scripts have the functions of clock.lua
// and permit_lib.lua put between their header and their body.
var (
	SemAcquire       = load("sem_acquire")
	SemUndo          = load("sem_undo")
	SemRelease       = load("sem_release")
	SemTrySetPermits = loadWith("sem_trysetpermits", "tryset")
	SemDrain         = load("sem_drain")

	PermitAcquire     = loadPermit("permit_acquire")
	PermitRelease     = loadPermit("permit_release")
	PermitAvailable   = loadPermit("permit_available")
	PermitUpdateLease = loadPermit("permit_updatelease")
	PermitRenew       = loadPermit("permit_renew")

	LatchTrySetCount = loadWith("latch_trysetcount", "tryset")
	LatchCountDown   = load("latch_countdown")
)

// SynchronizerScripts lists the synchronizers' scripts, for tests.
var SynchronizerScripts = []*Script{
	SemAcquire, SemUndo, SemRelease, SemTrySetPermits, SemDrain,
	PermitAcquire, PermitRelease, PermitAvailable, PermitUpdateLease, PermitRenew,
	LatchTrySetCount, LatchCountDown,
}

func loadPermit(name string) *Script { return loadWith(name, "clock", "queue", "permit_lib") }
