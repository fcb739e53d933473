package registry

import (
	"embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// scriptFiles holds the Lua sources; each script is time.lua (the shared
// helpers) followed by its body.
//
//go:embed scripts/*.lua
var scriptFiles embed.FS

// The scripts, each atomic on the server and one round trip.
var (
	registerScript   = script("register.lua")
	heartbeatScript  = script("heartbeat.lua")
	setStateScript   = script("set_state.lua")
	deregisterScript = script("deregister.lua")
	probeScript      = script("probe.lua")
	liveRemoveScript = script("live_remove.lua")
	regAllowScript   = script("reg_allow.lua")
	nodeRegScript    = script("node_reg_allow.lua")
)

// script joins the helpers and the named body into one script; a missing
// file is a bug in this package, caught by any test.
func script(body string) *redis.Script {
	var b strings.Builder
	for _, f := range []string{"time.lua", body} {
		src, err := scriptFiles.ReadFile("scripts/" + f)
		if err != nil {
			panic("registry: " + err.Error())
		}
		b.Write(src)
		b.WriteByte('\n')
	}
	return redis.NewScript(b.String())
}

// ints reads a script's array reply of at least want integers.
func ints(cmd *redis.Cmd, want int) ([]int64, error) {
	v, err := cmd.Int64Slice()
	if err != nil {
		return nil, err
	}
	if len(v) < want {
		return nil, fmt.Errorf("script reply has %d fields, want %d", len(v), want)
	}
	return v, nil
}
