package agentflags

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmplat/llmplat/runtime/nodeproto"
)

const goodModel = "name=llama-8b,served=meta-llama/Llama-3.1-8B-Instruct,max-num-seqs=64,max-model-len=8192,kv-tokens=185000"

func TestParse(t *testing.T) {
	good := Command{Server: "wss://orch.example/v1/nodes/connect", NodeID: "gpu-1", Models: []string{goodModel}}
	tests := []struct {
		name      string
		edit      func(*Command)
		wantFlag  string // "" when accepted
		wantIndex int
	}{
		{"good", func(*Command) {}, "", 0},
		{"ws", func(c *Command) { c.Server = "ws://127.0.0.1:7070/v1/nodes/connect" }, "", 0},
		{"empty server", func(c *Command) { c.Server = "" }, "server", -1},
		{"http server", func(c *Command) { c.Server = "http://orch.example/v1/nodes/connect" }, "server", -1},
		{"not a url", func(c *Command) { c.Server = "not a url" }, "server", -1},
		{"no host", func(c *Command) { c.Server = "wss:///v1/nodes/connect" }, "server", -1},
		{"bad node id", func(c *Command) { c.NodeID = "a b" }, "node-id", -1},
		{"no model", func(c *Command) { c.Models = nil }, "model", -1},
		{"served name with a comma", func(c *Command) {
			c.Models = append(c.Models, FormatModel(nodeproto.Model{Name: "b", ServedName: "a,b=c", MaxNumSeqs: 1, MaxModelLen: 2, KVCapacityTokens: 3}))
		}, "model", 1},
		{"model twice", func(c *Command) { c.Models = append(c.Models, goodModel) }, "model", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := good
			c.Models = append([]string(nil), good.Models...)
			tt.edit(&c)
			_, err := Parse(c)
			if tt.wantFlag == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var fe *FlagError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse error = %v, want a *FlagError wrapping ErrInvalid", err)
			}
			if fe.Flag != tt.wantFlag || fe.Index != tt.wantIndex {
				t.Errorf("got -%s[%d], want -%s[%d]: %v", fe.Flag, fe.Index, tt.wantFlag, tt.wantIndex, err)
			}
		})
	}
}

func TestFormatModelRoundTrip(t *testing.T) {
	want := nodeproto.Model{Name: "llama-8b", ServedName: "meta-llama/Llama-3.1-8B-Instruct", MaxNumSeqs: 64, MaxModelLen: 8192, KVCapacityTokens: 185000}
	got, err := ParseModel(FormatModel(want))
	if err != nil {
		t.Fatalf("ParseModel: %v", err)
	}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if s := FormatModel(want); s != goodModel {
		t.Errorf("FormatModel = %q, want %q", s, goodModel)
	}
	if _, err := ParseModel(strings.Replace(goodModel, "kv-tokens=185000", "kv-tokens=0", 1)); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero kv-tokens: err = %v", err)
	}
}
