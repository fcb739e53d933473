//go:build !parsecount

package engineclient

// counted marks one ParseEvent. Only a build with the parsecount tag
// counts (count_on.go): the tests that show each event is parsed once per
// path run in one.
func counted() {}

// Parses is how many events ParseEvent has read in this process, in a
// build with the parsecount tag; -1 in any other.
func Parses() int64 { return -1 }
