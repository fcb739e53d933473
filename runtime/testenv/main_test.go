package testenv

import "testing"

func TestMain(m *testing.M) {
	MainWithLeakCheck(m)
}
