package scripts

// The fair lock's scripts. Each is its own file with the queue functions
// of fair_queue.lua put between its header and its body, so that its
// source still begins with its header.
var (
	FairLock        = loadWith("fair_lock", "clock", "fair_queue", "fence", "lockhash")
	FairUnlock      = loadWith("fair_unlock", "clock", "fence", "fair_queue")
	FairPass        = loadWith("fair_pass", "clock", "fence", "fair_queue")
	FairLeave       = loadFair("fair_leave")
	FairForceUnlock = loadWith("fair_forceunlock", "clock", "fair_queue", "fence", "lockhash")
	FairTell        = loadFair("fair_tell")
)

func loadFair(name string) *Script { return loadWith(name, "clock", "fair_queue") }
