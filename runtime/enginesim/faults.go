package enginesim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Faults are the failures the simulator injects. They are set at start
// (Config.Faults) and at run time (Sim.SetFaults, POST /sim/faults), each
// time as a whole: a field left out is off.
type Faults struct {
	// ErrorRate is the fraction of requests answered 500 before anything
	// is streamed.
	ErrorRate float64 `json:"error_rate"`
	// DieAfterTokens kills the engine when a sequence has streamed this many
	// tokens: in-flight streams get an error event then [DONE], /health and
	// new requests get 503 until Dead is cleared. Zero is never.
	DieAfterTokens int64 `json:"die_after_tokens"`
	// Hang accepts requests and never sends a token until the client goes.
	Hang bool `json:"hang"`
	// StallAfterTokens stops a stream that has sent this many tokens: the
	// connection stays open and nothing more comes until the client goes,
	// as from an engine wedged mid-generation. Zero is never.
	StallAfterTokens int64 `json:"stall_after_tokens"`
	// SlowStart is extra (simulated) delay before a request reaches the
	// engine, and so before its first token.
	SlowStart Duration `json:"slow_start"`
	// Dead is the engine's state: setting it kills the engine now, clearing
	// it revives a dead engine.
	Dead bool `json:"dead"`
}

// Validate reports the first impossible field.
func (f Faults) Validate() error {
	switch {
	case f.ErrorRate < 0 || f.ErrorRate > 1:
		return fmt.Errorf("error_rate must be in [0, 1], got %g", f.ErrorRate)
	case f.DieAfterTokens < 0:
		return fmt.Errorf("die_after_tokens must not be negative, got %d", f.DieAfterTokens)
	case f.StallAfterTokens < 0:
		return fmt.Errorf("stall_after_tokens must not be negative, got %d", f.StallAfterTokens)
	case f.SlowStart < 0:
		return fmt.Errorf("slow_start must not be negative, got %s", time.Duration(f.SlowStart))
	}
	return nil
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("250ms"); a bare number is read as seconds.
type Duration time.Duration

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration: %w", err)
		}
		*d = Duration(v)
		return nil
	}
	var secs float64
	if err := json.Unmarshal(b, &secs); err != nil {
		return errors.New("duration: want a string such as \"250ms\" or a number of seconds")
	}
	*d = Duration(secs * float64(time.Second))
	return nil
}

// maxFaultsBody bounds a POST /sim/faults body: the object has five fields.
const maxFaultsBody = 4 << 10

func (s *Sim) handleGetFaults(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Faults())
}

func (s *Sim) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxFaultsBody))
	dec.DisallowUnknownFields()
	var f Faults
	if err := dec.Decode(&f); err != nil {
		writeError(w, http.StatusBadRequest, "", "invalid faults: "+err.Error())
		return
	}
	if err := f.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "", err.Error())
		return
	}
	s.SetFaults(f)
	writeJSON(w, http.StatusOK, s.Faults())
}
