package servicetest

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	CloseSharedKafka()
	os.Exit(code)
}
