//go:build !race

package logstore_test

const raceEnabled = false
