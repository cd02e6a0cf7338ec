//go:build !unix

package npmfixture

// lockFile is a no-op where flock is unavailable: parallel test packages may
// then race on npm ci, which the project's supported platforms never hit.
func lockFile(string) (func(), error) { return func() {}, nil }
