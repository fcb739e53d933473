// Package hostilebody is test support: the large chat request bodies of
// the hostile-input report that a gateway's body budget is measured
// against (docs/reliability.md), each built to a size.
package hostilebody

import (
	"strconv"
	"strings"
)

// Shape is one kind of hostile body.
type Shape struct {
	// Name says what the body is dense with.
	Name string
	// Build returns a body of about size bytes, never more.
	Build func(size int) string
}

// Shapes are the bodies dense with what a decode allocates the most for:
// one-word messages (a decoded message is some 150 bytes), a JSON schema
// of hundreds of thousands of keys (the duplicate-key check), and
// one-word messages whose keys are escaped (left to the exact two-pass
// decode, whose worst case they are).
var Shapes = []Shape{
	{"one-word messages", func(size int) string {
		return fill(size, `{"model":"llama-8b","messages":[`, func(int) string { return `{"role":"user","content":"a"}` }, `]}`)
	}},
	{"wide json_schema", func(size int) string {
		return fill(size, `{"model":"llama-8b","messages":[{"role":"user","content":"hi"}],`+
			`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{`,
			func(i int) string { return `"k` + strconv.Itoa(i) + `":1` }, `}}}}}`)
	}},
	{"escaped keys", func(size int) string {
		return fill(size, `{"model":"llama-8b","messag\u0065s":[`, func(int) string { return `{"r\u006fle":"user","content":"a"}` }, `]}`)
	}},
}

// Messages returns a body of n one-word messages.
func Messages(n int) string {
	return `{"model":"llama-8b","messages":[` + strings.TrimSuffix(strings.Repeat(`{"role":"user","content":"a"},`, n), ",") + `]}`
}

// fill writes head, then the items item(0), item(1)… joined by commas while
// they fit, then tail, in at most size bytes.
func fill(size int, head string, item func(i int) string, tail string) string {
	var b strings.Builder
	b.Grow(size)
	b.WriteString(head)
	for i := 0; ; i++ {
		next := item(i)
		if b.Len()+len(next)+1+len(tail) > size {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(next)
	}
	b.WriteString(tail)
	return b.String()
}
