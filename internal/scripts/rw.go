package scripts

// The read-write lock's scripts (Redisson's RReadWriteLock layout). Each
// file's header names its KEYS, ARGV and return values.
var (
	RWReadLock    = loadWith("rw_read_lock", "fence")
	RWWriteLock   = loadWith("rw_write_lock", "fence")
	RWReadUnlock  = loadWith("rw_read_unlock", "rw_readers")
	RWWriteUnlock = loadWith("rw_write_unlock", "rw_readers")
	RWRenew       = load("rw_renew")
	RWForceUnlock = load("rw_forceunlock")
)
