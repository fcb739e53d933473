package nodeagent

import (
	"errors"
	"testing"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

func TestParseModel(t *testing.T) {
	tests := []struct {
		name, in string
		want     nodeproto.Model
		wantErr  bool
	}{
		{"full", "name=llama-8b,served=meta-llama/Llama-3.1-8B-Instruct,max-num-seqs=64,max-model-len=8192,kv-tokens=185000",
			nodeproto.Model{Name: "llama-8b", ServedName: "meta-llama/Llama-3.1-8B-Instruct", MaxNumSeqs: 64, MaxModelLen: 8192, KVCapacityTokens: 185000}, false},
		{"missing key", "name=a,served=b,max-num-seqs=1,max-model-len=2", nodeproto.Model{}, true},
		{"unknown key", "name=a,served=b,max-num-seqs=1,max-model-len=2,kv-tokens=3,x=1", nodeproto.Model{}, true},
		{"repeated key", "name=a,name=b,served=b,max-num-seqs=1,max-model-len=2,kv-tokens=3", nodeproto.Model{}, true},
		{"not a number", "name=a,served=b,max-num-seqs=many,max-model-len=2,kv-tokens=3", nodeproto.Model{}, true},
		{"zero", "name=a,served=b,max-num-seqs=0,max-model-len=2,kv-tokens=3", nodeproto.Model{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseModel(tt.in)
			if tt.wantErr {
				if !errors.Is(err, ErrConfig) {
					t.Fatalf("ParseModel error = %v, want ErrConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseModel: %v", err)
			}
			if got != tt.want {
				t.Errorf("ParseModel = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	good := Config{ServerURL: "ws://orch.example/v1/nodes/connect", NodeID: "n1", Token: "t"}
	tests := []struct {
		name string
		edit func(*Config)
	}{
		{"http server URL", func(c *Config) { c.ServerURL = "http://orch.example/v1/nodes/connect" }},
		{"bad node id", func(c *Config) { c.NodeID = "a b" }},
		{"no token", func(c *Config) { c.Token = "" }},
	}
	if _, err := New(good); err != nil {
		t.Fatalf("New(good): %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			tt.edit(&c)
			if _, err := New(c); !errors.Is(err, ErrConfig) {
				t.Errorf("New error = %v, want ErrConfig", err)
			}
		})
	}
}
