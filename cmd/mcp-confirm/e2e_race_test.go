//go:build race

package main

// raceBuild: the tests run under -race, so TestMain builds the binary with
// -race as well.
const raceBuild = true
