//go:build !linux

package pending

import (
	"errors"
	"os"
)

// Elsewhere (macOS, the BSDs) there are no OFD locks to hold on the
// journal itself (liveness_linux.go): no owner takes a slot, every owner id
// is tagged with its process (ownerTag), and an owner whose lock file is
// missing is judged by whether that process still runs. The start time
// that tells a reused pid on Linux is not read here: a pid reused by
// another process makes a dead owner look alive, so its calls wait for
// the operator; never the reverse.

var errNoSlots = errors.New("no OFD locks on this system")

func ownerSlot(string) int64 { return 0 }

func takeSlot(string, string) (*os.File, bool, error) { return nil, false, errNoSlots }

func freeSlot(*os.File, string) error { return nil }

func slotHeld(string, string) (bool, error) { return false, nil }

func processStart(int) string { return "" }
