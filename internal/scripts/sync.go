package scripts

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

func loadPermit(name string) *Script { return loadWith(name, "psem_lib") }
