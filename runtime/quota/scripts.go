package quota

import (
	"embed"
	"strings"

	"github.com/redis/go-redis/v9"
)

// scriptFiles holds the Lua sources; each script is its library files
// followed by its body, so the helpers are written once.
//
//go:embed scripts/*.lua
var scriptFiles embed.FS

// The scripts, each one atomic on the server and one EVALSHA round trip.
var (
	admitScript       = script("time.lua", "streams_lib.lua", "rate_lib.lua", "admit.lua")
	claimScript       = script("time.lua", "claim.lua")
	countTokensScript = script("tokens_count.lua")
	finishScript      = script("finish.lua")
	enqueueScript     = script("time.lua", "queue_lib.lua", "queue_enqueue.lua")
	turnScript        = script("time.lua", "queue_lib.lua", "queue_turn.lua")
	reinsertScript    = script("time.lua", "queue_lib.lua", "queue_reinsert.lua")
	leaveScript       = script("time.lua", "queue_lib.lua", "queue_leave.lua")
	notifyScript      = script("time.lua", "queue_lib.lua", "queue_notify.lua")
	depthScript       = script("time.lua", "queue_lib.lua", "queue_depth.lua")
)

// script joins the named files into one script; a missing file is a bug in
// this package, caught by any test.
func script(files ...string) *redis.Script {
	var b strings.Builder
	for _, f := range files {
		src, err := scriptFiles.ReadFile("scripts/" + f)
		if err != nil {
			panic("quota: " + err.Error())
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return redis.NewScript(b.String())
}

// ints converts a script's array reply of integers.
func ints(cmd *redis.Cmd, want int) ([]int64, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(v) < want {
		return nil, errShortReply(len(v), want)
	}
	return v, nil
}
