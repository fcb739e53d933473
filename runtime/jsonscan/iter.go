package jsonscan

// Object iterates over the members of one JSON object. Each value Next
// returns has been checked whole; the object's own end, and that nothing
// but whitespace follows it, is checked when Next reports the end. Only an
// object read to its end with Malformed false was well-formed.
type Object struct {
	d       []byte
	i       int
	started bool
	done    bool
	bad     bool
}

// Members returns an iterator over the object data holds, whitespace
// around it allowed.
func Members(data []byte) Object {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return Object{bad: true}
	}
	return Object{d: data, i: i + 1}
}

// Next returns the next member: its key as written between the quotes
// (escapes left in) and its value's span. It reports false at the
// object's end or at malformed input.
func (o *Object) Next() (key, value []byte, ok bool) {
	if o.done || o.bad {
		return nil, nil, false
	}
	d := o.d
	i := skipSpace(d, o.i)
	if i >= len(d) {
		return o.fail()
	}
	if d[i] == '}' {
		o.done = true
		o.bad = skipSpace(d, i+1) != len(d)
		return nil, nil, false
	}
	if o.started {
		if d[i] != ',' {
			return o.fail()
		}
		i = skipSpace(d, i+1)
	}
	o.started = true
	if i >= len(d) || d[i] != '"' {
		return o.fail()
	}
	end := skipString(d, i)
	if end < 0 {
		return o.fail()
	}
	key = d[i+1 : end-1]
	if i = skipSpace(d, end); i >= len(d) || d[i] != ':' {
		return o.fail()
	}
	i = skipSpace(d, i+1)
	if end = skipValue(d, i, 1); end < 0 {
		return o.fail()
	}
	o.i = end
	return key, d[i:end], true
}

func (o *Object) fail() ([]byte, []byte, bool) {
	o.bad = true
	return nil, nil, false
}

// Malformed reports whether the input was not a well-formed object, as
// far as Next has read.
func (o *Object) Malformed() bool { return o.bad }

// Array iterates over the elements of one JSON array, checking as Object
// does.
type Array struct {
	d       []byte
	i       int
	started bool
	done    bool
	bad     bool
}

// Elements returns an iterator over the array data holds, whitespace
// around it allowed.
func Elements(data []byte) Array {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return Array{bad: true}
	}
	return Array{d: data, i: i + 1}
}

// Next returns the next element's span. It reports false at the array's
// end or at malformed input.
func (a *Array) Next() ([]byte, bool) {
	if a.done || a.bad {
		return nil, false
	}
	d := a.d
	i := skipSpace(d, a.i)
	if i >= len(d) {
		a.bad = true
		return nil, false
	}
	if d[i] == ']' {
		a.done = true
		a.bad = skipSpace(d, i+1) != len(d)
		return nil, false
	}
	if a.started {
		if d[i] != ',' {
			a.bad = true
			return nil, false
		}
		i = skipSpace(d, i+1)
	}
	a.started = true
	end := skipValue(d, i, 1)
	if end < 0 {
		a.bad = true
		return nil, false
	}
	a.i = end
	return d[i:end], true
}

// Malformed reports whether the input was not a well-formed array, as far
// as Next has read.
func (a *Array) Malformed() bool { return a.bad }
