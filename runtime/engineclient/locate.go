package engineclient

import (
	"bytes"

	"github.com/llmplat/llmplat/runtime/dispatch"
	"github.com/llmplat/llmplat/runtime/jsonscan"
)

// locate finds in an event what the gateway rewrites
// (dispatch.Event.Rewrite): the value of its top-level "model" member that
// is a string, and the value of its top-level "usage" member that is an
// object with the whole member and one comma beside it. The event is read
// by its structure, in one jsonscan pass, so the engine's spacing and
// member order do not matter (an engine written in Python writes
// "model": "x"), and text that mentions "model" or "usage" is never taken
// for a member. A key spelled with escapes is not found; nor is anything
// in an event that is not one well-formed object.
func locate(data []byte) (model, usage, member dispatch.Span) {
	kept := -1     // where the last member kept ends
	dropping := -1 // where a first member "usage" starts, until the next member's key
	o := jsonscan.Members(data)
	for k, v, more := o.Next(); more; k, v, more = o.Next() {
		keyAt := offsetIn(data, k) - 1 // its opening quote
		if dropping >= 0 {
			member = dispatch.Span{From: dropping, To: keyAt}
			dropping = -1
		}
		start := offsetIn(data, v)
		end := start + len(v)
		switch {
		case string(k) == "model" && v[0] == '"':
			model = dispatch.Span{From: start, To: end}
		case string(k) == "usage" && v[0] == '{':
			usage = dispatch.Span{From: start, To: end}
			if kept < 0 {
				dropping = keyAt // up to the next member, its comma with it
			} else {
				member = dispatch.Span{From: kept, To: end} // the comma before it too
			}
		}
		kept = end
	}
	if o.Malformed() {
		return dispatch.Span{}, dispatch.Span{}, dispatch.Span{}
	}
	if dropping >= 0 { // the only member: up to the closing brace
		member = dispatch.Span{From: dropping, To: bytes.LastIndexByte(data, '}')}
	}
	return model, usage, member
}

// offsetIn is where part, a subslice jsonscan returned, starts in whole.
func offsetIn(whole, part []byte) int { return cap(whole) - cap(part) }
