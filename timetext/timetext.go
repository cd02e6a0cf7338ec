// Package timetext words durations for people: the short ages the console
// and the CLI's lists show next to a call.
package timetext

import (
	"fmt"
	"time"
)

// Age is a short, truncated duration: 12s, 4m, 3h, 2d. Hours run up to 48
// before days start, so "yesterday" still reads in hours. A negative
// duration (a timestamp ahead of the local clock: clock skew between the
// processes sharing a journal) is "0s", never a negative age.
func Age(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
