package relock

import (
	"testing"

	"github.com/relock-go/relock/internal/door"
)

// serverReply is an error reply of the server, as the door gives it
// whatever the client library.
type serverReply = door.Error

// TestIsNoPerm: every form in which a server tells an ACL refusal, to a
// command or to a script's call, is ErrNoPermission's; no other reply is.
// The replies are the servers' own texts.
func TestIsNoPerm(t *testing.T) {
	for _, tc := range []struct {
		server, reply string
		noPerm        bool
	}{
		{"Redis 6.2", "NOPERM this user has no permissions to run the 'eval' command or its subcommand", true},
		{"Redis 6.2", "ERR Error running script (call to f_afd1cf86f5e3594c2af58a657a9bee0c137cdcb2): @user_script:1: @user_script: 1: The user executing the script can't run this command or subcommand ", true},
		{"Redis 7.0", "NOPERM this user has no permissions to run the 'get' command", true},
		{"Redis 7.0", "NOPERM this user has no permissions to access one of the keys used as arguments", true},
		{"Redis 7.0", "NOPERM this user has no permissions to access one of the channels used as arguments", true},
		{"Redis 7.0", "ERR The user executing the script can't run this command or subcommand script: afd1cf86f5e3594c2af58a657a9bee0c137cdcb2, on @user_script:1.", true},
		{"Redis 7.0", "ERR The user executing the script can't access at least one of the keys mentioned in the command arguments script: eefb072c762647cc8d8a40e7fe048aaf8872d416, on @user_script:1.", true},
		{"Redis 7.0", "ERR The user executing the script can't publish to the channel mentioned in the command script: 5b69fa8e2beb22e86ad825da8c6eefe5e202fbee, on @user_script:1.", true},
		{"Redis 7.2, 8.0, Valkey 8", "NOPERM User u has no permissions to run the 'eval' command", true},
		{"Redis 7.2, 8.0, Valkey 8", "NOPERM No permissions to access a key", true},
		{"Redis 7.2, 8.0, Valkey 8", "NOPERM No permissions to access a channel", true},
		{"Redis 7.2, 8.0, Valkey 8", "ERR ACL failure in script: User u has no permissions to run the 'publish' command script: afd1cf86f5e3594c2af58a657a9bee0c137cdcb2, on @user_script:1.", true},
		{"Redis 7.2, 8.0, Valkey 8", "ERR ACL failure in script: No permissions to access a key script: eefb072c762647cc8d8a40e7fe048aaf8872d416, on @user_script:1.", true},
		{"Redis 7.2, 8.0, Valkey 8", "ERR ACL failure in script: No permissions to access a channel script: 5b69fa8e2beb22e86ad825da8c6eefe5e202fbee, on @user_script:1.", true},
		{"Valkey 9", "ERR ACL failure in script: No permissions to access database script: on @user_script:1.", true},
		{"any", "NOAUTH Authentication required.", false},
		{"any", "WRONGPASS invalid username-password pair or user is disabled.", false},
		{"any", "ERR unknown command 'eval', with args beginning with: 'return 1' '0' ", false},
		{"any", "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.", false},
		{"any", "WRONGTYPE Operation against a key holding the wrong kind of value script: afd1cf86f5e3594c2af58a657a9bee0c137cdcb2, on @user_script:3.", false},
		{"Redis", "ERR Unknown Redis command called from script script: afd1cf86f5e3594c2af58a657a9bee0c137cdcb2, on @user_script:9.", false},
		{"Valkey 8", "ERR Unknown command called from script script: afd1cf86f5e3594c2af58a657a9bee0c137cdcb2, on @user_script:9.", false},
	} {
		if got := isNoPerm(serverReply(tc.reply)); got != tc.noPerm {
			t.Errorf("%s: isNoPerm(%q) = %v, want %v", tc.server, tc.reply, got, tc.noPerm)
		}
	}
}
