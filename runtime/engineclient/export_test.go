package engineclient

// The engine-client helpers the tests of the internal hop use
// (hop_test.go, package engineclient_test).
var (
	GoldenEngine      = goldenEngine
	HangingEngine     = hangingEngine
	CheckCancelAborts = checkCancelAborts
	Job               = job
	Drain             = drain
)
