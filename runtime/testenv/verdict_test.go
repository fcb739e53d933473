package testenv

import "testing"

func TestDecide(t *testing.T) {
	tests := []struct {
		name      string
		ci        string
		available bool
		want      verdict
	}{
		{name: "ci true, available", ci: "true", available: true, want: verdictUse},
		{name: "ci true, missing", ci: "true", available: false, want: verdictFail},
		{name: "ci 1, missing", ci: "1", available: false, want: verdictFail},
		{name: "ci TRUE, missing", ci: "TRUE", available: false, want: verdictFail},
		{name: "ci unset, available", ci: "", available: true, want: verdictUse},
		{name: "ci unset, missing", ci: "", available: false, want: verdictSkip},
		{name: "ci false, missing", ci: "false", available: false, want: verdictSkip},
		{name: "ci 0, missing", ci: "0", available: false, want: verdictSkip},
		{name: "ci garbage, missing", ci: "maybe", available: false, want: verdictSkip},
		{name: "ci false, available", ci: "false", available: true, want: verdictUse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decide(tt.ci, tt.available)
			if got != tt.want {
				t.Errorf("decide(%q, %v) = %v, want %v", tt.ci, tt.available, got, tt.want)
			}
		})
	}
}
