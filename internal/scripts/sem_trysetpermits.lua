-- sem_trysetpermits.lua: set a semaphore's permits if it has none set.
--
-- KEYS, ARGV  as in tryset.lua: KEYS[1] the number of permits available,
--          ARGV[1] the number to set, ARGV[4] the semaphore's channel,
--          told the number set
--
-- Returns  1: set; 0: the semaphore was set already, nothing changed

return try_set(ARGV[1])
